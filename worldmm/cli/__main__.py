from worldmm.cli import main

main()
