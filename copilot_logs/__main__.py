from copilot_logs.cli import main

main()
