#!/usr/bin/env node
// The `ptybroker` command: the CLI bundled by `npm run build` (client/cli.ts).
import "../dist/client/cli.js";
