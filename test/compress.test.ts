// Output compressed once per chunk (`compress=deflate`, 0x06 frames) beside plain viewers on the
// same session: the same bytes at the same offsets, and no permessage-deflate on the socket that
// opted in (docs/protocol.md §5, "Compressed output").
import { describe, expect, it } from "vitest";
import { PtyBroker } from "../client/index.js";
import { TENANTS } from "./global-setup.js";
import { line, onSharedStack, until } from "./harness.js";

const suite = onSharedStack({ clients: "close" });
const { api, url } = suite;

describe("compressed output (compress=deflate)", () => {
  it("gives an opted-in viewer and a plain one byte-identical output at exact offsets", async () => {
    const s = await suite.session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const packed = suite.connect(s.id, { query: "compress=deflate" });
    const plain = suite.connect(s.id);
    await Promise.all([packed.opened, plain.opened]);
    // workerd declined permessage-deflate for the one that opted in, and took it for the other.
    expect(packed.socket.extensions).toBe("");
    expect(plain.socket.extensions).toContain("permessage-deflate");
    const livePacked = await packed.waitForMessage((m) => m.type === "live", "live");
    const livePlain = await plain.waitForMessage((m) => m.type === "live", "live");

    // Compressible lines, incompressible random bytes (sent as 0x01: deflate would not shrink
    // them), multi-byte characters, and short echoes.
    packed.send(
      'for i in $(seq 1 2000); do echo "line $i é€😀"; done; head -c 300000 /dev/urandom | base64 -w 0; echo; echo packed-$((6*7))\n',
    );
    await packed.waitForOutput(line("packed-42"));
    await plain.waitForOutput(line("packed-42"));
    await until(
      async () => {
        const { offset } = await api.get(s.id);
        return offset === packed.nextOffset && offset === plain.nextOffset;
      },
      5000,
      "both clients to hold every byte the edge has",
    );
    expect(packed.offsetErrors).toEqual([]);
    expect(plain.offsetErrors).toEqual([]);
    const from = Math.max(livePacked.offset, livePlain.offset);
    expect(packed.bytesFrom(from).equals(plain.bytesFrom(from))).toBe(true);
    expect(packed.text).toContain("line 2000 é€😀");
    // Deflated frames came to the one that asked, and none to the other.
    expect(packed.deflatedFrames).toBeGreaterThan(0);
    expect(plain.deflatedFrames).toBe(0);

    // The session's end comes after the last output, and the close after `exit`, in order.
    packed.send("exit 7\n");
    expect(await packed.waitForClose()).toBe(4010);
    expect(await plain.waitForClose()).toBe(4010);
    expect(packed.messages.at(-1)).toMatchObject({ type: "exit", exitCode: 7 });
    expect(packed.nextOffset).toBe(plain.nextOffset);
    expect(packed.bytesFrom(from).equals(plain.bytesFrom(from))).toBe(true);
    await api.destroy(s.id);
  });

  it("replays from an offset to an opted-in client, and leaves raw mode unchanged", async () => {
    const s = await suite.session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const writer = suite.connect(s.id);
    await writer.opened;
    writer.send('for i in $(seq 1 1500); do echo "replayed line $i"; done; echo replay-$((6*7))\n');
    await writer.waitForOutput(line("replay-42"));
    const late = suite.connect(s.id, { query: "from=0&compress=deflate" });
    const raw = suite.connect(s.id, { query: "mode=raw&compress=deflate" });
    await Promise.all([late.opened, raw.opened]);
    await late.waitForMessage((m) => m.type === "live", "live");
    writer.send("echo after-$((6*7))\n");
    await late.waitForOutput(line("after-42"));
    await raw.waitForOutput(line("after-42"));
    await until(async () => (await api.get(s.id)).offset === late.nextOffset, 5000, "the late client to hold every byte");
    expect(late.offsetErrors).toEqual([]);
    expect(late.startOffset).toBe(0);
    expect(late.bytesFrom(0).equals(writer.bytesFrom(0))).toBe(true);
    expect(raw.messages).toEqual([]); // raw mode: plain bytes, no control messages
    expect(raw.text).toContain("after-42");
    await api.destroy(s.id);
  });

  it("the SDK asks for it by default and delivers the same bytes, in order, as a plain client", async () => {
    const s = await suite.session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const plain = suite.connect(s.id);
    const packed = suite.connect(s.id, { query: "compress=deflate" });
    await Promise.all([plain.opened, packed.opened]);
    await plain.waitForMessage((m) => m.type === "live", "live");
    const broker = new PtyBroker({ url, apiKey: TENANTS.acme });
    const chunks: { offset: number; bytes: Buffer }[] = [];
    const pty = await broker.connect(s.id, { from: "live", onData: (bytes, offset) => chunks.push({ offset, bytes: Buffer.from(bytes) }) });
    // connect() resolves at `hello`; the live offset comes with `live`, a message later.
    const from = await new Promise<number>((resolve) => {
      const off = pty.on("live", (offset) => {
        off();
        resolve(offset);
      });
    });
    plain.send('for i in $(seq 1 2000); do echo "sdk line $i é€😀"; done; echo sdk-$((6*7))\n');
    await plain.waitForOutput(line("sdk-42"));
    await until(() => pty.offset === plain.nextOffset && packed.nextOffset === plain.nextOffset, 10_000, "the SDK to hold every byte");
    // Offsets continue exactly from chunk to chunk.
    let next = from;
    for (const chunk of chunks) {
      expect(chunk.offset).toBe(next);
      next += chunk.bytes.byteLength;
    }
    expect(Buffer.concat(chunks.map((c) => c.bytes)).equals(plain.bytesFrom(from))).toBe(true);
    // The same output came as 0x06 frames to a client that asked for them, as the SDK does.
    expect(packed.deflatedFrames).toBeGreaterThan(0);
    await pty.close();
    await api.destroy(s.id);
  });

  it("refuses an unknown compress value", async () => {
    const s = await suite.session({ command: "/bin/bash", args: ["--norc", "--noprofile"] });
    const bad = suite.connect(s.id, { query: "compress=brotli" });
    // Refused as every bad connect is: the socket says why and closes (docs/protocol.md §5).
    expect(await bad.waitForClose()).toBe(1008);
    expect(bad.messages).toEqual([expect.objectContaining({ type: "error", code: "INVALID_REQUEST", message: expect.stringContaining("compress") })]);
    await api.destroy(s.id);
  });
});
