from topology.entry import main

main()
