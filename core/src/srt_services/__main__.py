from srt_services.cli.entry import main

main()
