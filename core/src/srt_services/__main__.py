from srt_services.cli.main import main

main()
