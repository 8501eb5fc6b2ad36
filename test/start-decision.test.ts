// A start is one decision (issue 13): a session whose start outlasts START_TIMEOUT_MS either
// runs (and says so, even late) or is `failed` and its runner is refused the link, so the
// process never starts. Before, a session could answer `failed` while the runner had already
// started its process (its `started` still queued), which then printed and was SIGKILLed.
import { beforeAll, describe, expect, it } from "vitest";
import type { ManagedProcess } from "../scripts/stack.js";
import { Api, SuiteCleanup, startSuiteStack, until } from "./harness.js";

const KEY = "starter-key";
const cleanup = new SuiteCleanup();
let runner: ManagedProcess;
let api: Api;

beforeAll(async () => {
  // 150 ms: about what a start takes here, so under 30 concurrent creates some finish first and
  // some do not, and some have their link open with `started` still to come.
  const stack = await startSuiteStack(
    {
      apiKeys: `starter:${KEY}`,
      vars: { START_TIMEOUT_MS: "150", MAX_CREATES_PER_MINUTE: "1000" },
      runners: [{ runnerId: "starter-runner" }],
    },
    cleanup,
  );
  [runner] = stack.runners;
  api = new Api(stack.edge.url, KEY);
});

/** The runner's log lines about one session (its key is `starter/<id>/<incarnation>`). */
function runnerSaid(id: string, event: string): boolean {
  return runner
    .output()
    .split("\n")
    .some((line) => line.includes(`"event":"${event}"`) && line.includes(`"key":"starter/${id}/`));
}

describe("the start decision", () => {
  it("never calls a started process failed, and never starts a failed one", async () => {
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        api.request("POST", "/v1/sessions", {
          id: `start-${i}`,
          command: "/bin/sh",
          args: ["-c", "echo ran-$0; exec sleep 60", `start-${i}`],
        }),
      ),
    );
    for (const answer of answers) expect(answer.status).toBe(201);
    const failed = answers.filter((a) => a.body.status === "failed").map((a) => a.body.id as string);
    const going = answers.filter((a) => a.body.status !== "failed").map((a) => a.body.id as string);
    console.log("start decisions", { failed: failed.length, going: going.length, late: answers.filter((a) => a.body.status === "starting").length });

    for (const id of failed) {
      expect(answers.find((a) => a.body.id === id)?.body).toMatchObject({ reason: "failed", pid: null });
      // The runner was told: its link for this session is refused, and it never starts the process.
      await until(() => runnerSaid(id, "link.refused"), 20_000, `the runner refused for ${id}`);
      expect(runnerSaid(id, "session.started")).toBe(false);
      const session = await api.get(id);
      expect(session).toMatchObject({ status: "failed", reason: "failed", offset: 0 });
    }
    for (const id of going) {
      // Running, even if it said so after the answer; its output is there.
      const session = await until(async () => {
        const s = await api.get(id);
        return s.status === "running" && s.offset > 0 ? s : undefined;
      }, 20_000, `${id} running with output`);
      expect(session.reason).toBeNull();
      const output = await api.request("GET", `/v1/sessions/${id}/output`);
      expect(output.body).toBe(`ran-${id}\r\n`);
    }
    for (const a of answers) await api.destroy(a.body.id);
  });
});
