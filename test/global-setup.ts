// One edge (wrangler dev → workerd) and one runner shared by the end-to-end suites.
// Suites that need their own topology (several runners, limits) start their own.
import type { TestProject } from "vitest/node";
import { type Edge, type ManagedProcess, secret, startEdge, startRunner } from "../scripts/stack.js";
import { waitForRunners } from "./harness.js";

export const TENANTS = { acme: "acme-key-e2e", globex: "globex-key-e2e" } as const;

let edge: Edge | undefined;
let runner: ManagedProcess | undefined;

export async function setup(project: TestProject): Promise<void> {
  const runnerToken = secret();
  edge = await startEdge({
    apiKeys: Object.entries(TENANTS)
      .map(([t, k]) => `${t}:${k}`)
      .join(","),
    runnerToken,
    vars: { MAX_INPUT_BYTES: "65536" },
  });
  runner = startRunner({ brokerUrl: edge.url, runnerToken, runnerId: "e2e-runner" });
  await waitForRunners(edge.url, runnerToken, 1);
  project.provide("edgeUrl", edge.url);
  project.provide("runnerToken", runnerToken);
}

export async function teardown(): Promise<void> {
  await runner?.stop();
  await edge?.stop();
}

declare module "vitest" {
  export interface ProvidedContext {
    edgeUrl: string;
    runnerToken: string;
  }
}
