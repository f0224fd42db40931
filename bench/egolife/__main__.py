"""`python -m bench.egolife ...`: the same command as `worldmm bench egolife ...`."""

from bench.egolife.run import main

main()
