from proflake.cli import main

main()
