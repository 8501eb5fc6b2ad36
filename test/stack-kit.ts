// Stacks of a suite's own (edge, Redis, runners): starting them and asking the edge about its runners.
export { waitForRunners } from "../scripts/stack.js";

/** `GET /internal/runners` as the runner token sees it. */
export async function listRunners(url: string, runnerToken: string): Promise<Record<string, any>[]> {
  const res = await fetch(`${url}/internal/runners`, { headers: { authorization: `Bearer ${runnerToken}` } });
  if (res.status !== 200) throw new Error(`GET /internal/runners: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { runners: Record<string, any>[] }).runners;
}
