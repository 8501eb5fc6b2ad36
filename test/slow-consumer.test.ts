// Issue 3: a client that stops reading during a 40 MB flood is cut with 4008 without stalling
// the process or the other client, and resumes by offset from the log.
import { describe, expect, it } from "vitest";
import { line, onSharedStack, sha256 } from "./harness.js";

const suite = onSharedStack();
const { api } = suite;

function connect(id: string, query: string) {
  return suite.connect(id, { query });
}

describe("slow consumers", () => {
  it("cuts a client that stops reading with 4008; the other gets every byte; the cut one resumes", { timeout: 180_000 }, async () => {
    const s = await suite.session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const fast = connect(s.id, "from=live");
    const slow = connect(s.id, "from=live");
    await fast.waitForMessage((m) => m.type === "live", "live");
    const slowLive = await slow.waitForMessage((m) => m.type === "live", "live");
    slow.socket.pause(); // stops reading from the TCP socket: the edge's sends pile up

    // 40 bursts of 750,000 zero bytes as base64 in 200-column lines: 40,000,000 characters of
    // output. The pauses between bursts let the reading client keep up on a busy 2-core machine
    // (a client that falls 8 MiB behind is cut too, by design); the paused one falls behind anyway.
    fast.send(
      "stty -echo; for i in $(seq 40); do head -c 750000 /dev/zero | base64 -w 200; sleep 0.1; done; echo flood-$((6*7))\n",
    );
    await fast.waitForOutput(line("flood-42"), 120_000);
    expect(fast.offsetErrors).toEqual([]);
    expect(fast.output.byteLength).toBeGreaterThan(40_000_000);
    expect((await api.get(s.id)).status).toBe("running");

    slow.socket.resume();
    expect(await slow.waitForClose(60_000)).toBe(4008);
    expect(slow.offsetErrors).toEqual([]);
    expect(slow.startOffset).toBe(slowLive.offset);
    const cutAt = slow.nextOffset as number;
    expect(cutAt).toBeLessThan(fast.nextOffset as number);
    expect(slow.output.equals(fast.bytesFrom(slowLive.offset).subarray(0, slow.output.byteLength))).toBe(true);

    // Resuming by offset replays exactly the rest, then goes live.
    const resumed = connect(s.id, `from=${cutAt}`);
    await resumed.waitForMessage((m) => m.type === "live", "live after replay", 60_000);
    expect(resumed.messages.filter((m) => m.type === "gap")).toEqual([]);
    expect(resumed.messages.find((m) => m.type === "replay")).toMatchObject({ from: cutAt });
    expect(resumed.startOffset).toBe(cutAt);
    expect(resumed.nextOffset).toBe(fast.nextOffset);
    expect(sha256(Buffer.concat([slow.output, resumed.output]))).toBe(sha256(fast.bytesFrom(slowLive.offset)));

    // Both still work live afterwards.
    resumed.send("echo after-$((1+2))\n");
    await resumed.waitForOutput(line("after-3"));
    await fast.waitForOutput(line("after-3"));
  });
});
