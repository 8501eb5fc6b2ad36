// Several clients on one session: identical bytes, independent lifetimes, late joiners.
import { describe, expect, it } from "vitest";
import { line, onSharedStack, until } from "./harness.js";

const suite = onSharedStack({ clients: "close" });
const { api } = suite;

function connect(id: string, query?: string, protocols?: string[]) {
  return suite.connect(id, { query, protocols });
}

describe("fan-out", () => {
  it("gives two clients byte-identical output, survives one leaving, and lets a third join", async () => {
    const s = await suite.session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const a = connect(s.id);
    const b = connect(s.id);
    await Promise.all([a.opened, b.opened]);
    const liveA = await a.waitForMessage((m) => m.type === "live", "live");
    const liveB = await b.waitForMessage((m) => m.type === "live", "live");

    // Output with multi-byte characters, enough to span many frames.
    a.send('for i in $(seq 1 3000); do echo "line $i é€😀"; done; echo fan-out-done\n');
    await a.waitForOutput(line("fan-out-done"));
    await b.waitForOutput(line("fan-out-done"));
    // The prompt may come in a later frame than the last line: wait until both hold all of it.
    await until(
      async () => {
        const { offset } = await api.get(s.id);
        return offset === a.nextOffset && offset === b.nextOffset;
      },
      5000,
      "both clients to hold every byte the edge has",
    );
    expect(a.offsetErrors).toEqual([]);
    expect(b.offsetErrors).toEqual([]);
    const from = Math.max(liveA.offset, liveB.offset);
    expect(a.nextOffset).toBe(b.nextOffset);
    expect(a.bytesFrom(from).equals(b.bytesFrom(from))).toBe(true);
    expect(a.text).toContain("line 3000 é€😀");

    await a.close();
    expect(a.closeCode).toBe(1000);
    expect((await api.get(s.id)).status).toBe("running");

    const c = connect(s.id);
    await c.opened;
    const liveC = await c.waitForMessage((m) => m.type === "live", "live");
    expect(liveC.offset).toBe(b.nextOffset);
    b.send("echo third-$((40+2))\n");
    await c.waitForOutput(line("third-42"));
    await b.waitForOutput(line("third-42"));
    expect(c.bytesFrom(liveC.offset).equals(b.bytesFrom(liveC.offset))).toBe(true);
    expect((await api.get(s.id)).clients).toBe(2);
  });

  it("serves raw mode (query or subprotocol) as plain bytes, with text frames as input", async () => {
    const s = await api.create({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const raw = connect(s.id, "mode=raw");
    const sub = connect(s.id, undefined, ["raw"]);
    await Promise.all([raw.opened, sub.opened]);
    expect(sub.socket.protocol).toBe("raw");
    raw.socket.send("echo raw-$((6*7))\n"); // a text frame is input in raw mode
    await raw.waitForOutput(line("raw-42"));
    await sub.waitForOutput(line("raw-42"));
    expect(raw.messages).toEqual([]); // no control messages in raw mode
    sub.socket.send(Buffer.from("exit 3\n")); // and a binary frame too
    expect(await raw.waitForClose()).toBe(4010);
    expect(await sub.waitForClose()).toBe(4010);
    expect(raw.messages).toEqual([]);
    await api.destroy(s.id);
  });
});
