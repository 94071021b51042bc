from dealer.cli.main import main

raise SystemExit(main())
