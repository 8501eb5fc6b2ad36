#!/usr/bin/env node
// The `ptybroker` command: the CLI bundled by `npm run build` (client/cli/main.ts).
import "../dist/client/cli.js";
