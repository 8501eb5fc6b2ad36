import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

// Four projects: pure logic in Node, the Worker inside workerd, and the whole stack (wrangler
// dev + real runners + real bash) end to end, as two: the suites that work and the suites that
// mostly wait, which run beside them.
/** End-to-end suites whose time is mostly waiting on a clock, not work (the e2e-waiting project). */
const WAITING_SUITES = [
  "test/reconnect-deadlines.test.ts",
  "test/control-heartbeat.test.ts",
  "test/resize-policy.test.ts",
  "test/timers.test.ts",
  "test/drain.test.ts",
  "test/retention-purge.test.ts",
];

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
          name: "e2e",
          include: ["test/**/*.test.ts"],
          exclude: WAITING_SUITES,
          environment: "node",
          globalSetup: ["test/global-setup.ts"],
          // One suite at a time: the stack already keeps both cores busy, and floods measure it.
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 90_000,
        },
      },
      {
        test: {
          // The suites that mostly wait on clocks (hibernation, heartbeats, timers, a network
          // blackhole, a drain): one at a time too, but beside the e2e project's suites, on a
          // stack of their own (the same global setup), so their waits do not add to the run.
          name: "e2e-waiting",
          include: WAITING_SUITES,
          environment: "node",
          globalSetup: ["test/global-setup.ts"],
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 90_000,
        },
      },
    ],
  },
});
