from llmdeploy.cli import main

main()
