from railforge.entry import main

main()
