from hefsearch.tui.cli import main

main()
