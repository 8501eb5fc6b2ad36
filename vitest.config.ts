import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

/**
 * End-to-end suites that start every process they use (their own edge, runners and Redis, with
 * tenants of their own) and measure no time, memory or process list beyond their own: they run
 * two at a time, in a group of their own. Most of their time is waiting (a heartbeat
 * going silent, a drain, a purge, an edge restarting), so two of them share the cores well.
 */
const PAIRED_E2E = [
  "audit",
  "control-heartbeat",
  "cors",
  "drain",
  "events",
  "input-restart",
  "keys",
  "placement",
  "resilience",
  "retention",
  "retention-purge",
  "screen-idle",
  "start-decision",
  "webhooks",
].map((name) => `test/${name}.test.ts`);

// Four projects: pure logic in Node, the Worker inside workerd, and the whole stack (wrangler
// dev + real runners + real bash) end to end: the suites above two at a time (their own group),
// then one file at a time the unit and workerd files (as they were written to run: a second file
// beside them made the Redis log's and the tenant object's tests miss), and every other e2e suite
// (they share one stack, or measure).
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["shared/**/*.test.ts", "runner/**/*.test.ts", "client/**/*.test.ts", "scripts/**/*.test.ts"],
          environment: "node",
        },
      },
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: {
                API_KEYS:
                  "acme:acme-key,globex:sha256:f2a455b59b858a04c51108416af2042203cb6ac35fa4141fba4148bc856e78d4",
                RUNNER_TOKEN: "runner-secret",
                TOKEN_SECRET: "token-secret",
                MAX_SESSIONS_PER_TENANT: "2",
              },
            },
          }),
        ],
        test: {
          name: "worker",
          include: ["worker/**/*.test.ts"],
          // The first request starts workerd, which takes seconds while other projects run.
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: "e2e-paired",
          include: PAIRED_E2E,
          environment: "node",
          maxWorkers: 2,
          sequence: { groupOrder: 1 },
          testTimeout: 60_000,
          hookTimeout: 90_000,
        },
      },
      {
        test: {
          name: "e2e",
          include: ["test/**/*.test.ts"],
          exclude: PAIRED_E2E,
          environment: "node",
          globalSetup: ["test/global-setup.ts"],
          // One suite at a time: the stack already keeps both cores busy, and floods measure it.
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 90_000,
        },
      },
    ],
  },
});
