from dealer.cli import main

raise SystemExit(main())
