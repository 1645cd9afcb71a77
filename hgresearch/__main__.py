from hgresearch.cli import main

main()
