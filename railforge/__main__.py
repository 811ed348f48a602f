from railforge.cli.entry import main

main()
