// One edge (wrangler dev → workerd), one Redis and one runner logging to it, shared by the
// end-to-end suites. Suites that need their own topology (several runners, limits, restarts)
// start their own.
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { secret } from "../scripts/stack.js";
import { unmountUnder } from "./cleanup.js";
import { type SuiteStack, startSuiteStack } from "./stack-kit.js";

export const TENANTS = { acme: "acme-key-e2e", globex: "globex-key-e2e" } as const;

let stack: SuiteStack | undefined;

/** Retention of the shared runner: large enough that the 40 MB flood suite can replay it all. */
export const SHARED_RETAIN_BYTES = 64 * 1024 * 1024;

export async function setup(project: TestProject): Promise<void> {
  const runnerToken = secret();
  const tokenSecret = secret();
  stack = await startSuiteStack({
    apiKeys: Object.entries(TENANTS)
      .map(([t, k]) => `${t}:${k}`)
      .join(","),
    runnerToken,
    tokenSecret,
    // The suites together create far more than the default 120 sessions a minute.
    vars: { MAX_INPUT_BYTES: "65536", MAX_CREATES_PER_MINUTE: "100000" },
    redis: true,
    runners: [{ runnerId: "e2e-runner", env: { OUTPUT_RETAIN_BYTES: String(SHARED_RETAIN_BYTES) } }],
  });
  const { edge, redis } = stack;
  const [runner] = stack.runners;
  project.provide("edgeUrl", edge.url);
  project.provide("runnerToken", runnerToken);
  project.provide("runnerPid", runner.pid);
  project.provide("edgePid", edge.pid);
  project.provide("tokenSecret", tokenSecret);
  project.provide("redisUrl", redis.url);
}

export async function teardown(): Promise<void> {
  await stack?.stop();
  // The tenants' workspace filesystems the suites' runners left in the shared workspace.
  unmountUnder(join(tmpdir(), "ptybroker-workspace")); // the shared runner's RUNNER_WORKSPACE default (test/shared-stack.ts)
}

declare module "vitest" {
  export interface ProvidedContext {
    edgeUrl: string;
    runnerToken: string;
    runnerPid: number;
    edgePid: number;
    tokenSecret: string;
    redisUrl: string;
  }
}
