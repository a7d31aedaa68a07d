from llmdeploy.cli.commands import main

main()
