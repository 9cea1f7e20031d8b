"""``python -m ctxpolicy``: the same command line as the ``ctxpolicy`` console script."""

from ctxpolicy.cli import console_main

if __name__ == "__main__":
    console_main()
