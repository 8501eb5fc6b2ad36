// The input gate as pure logic: a fake queue the test fills and drains by hand. The real path
// (a process that does not read, 50 MB of input, the runner's RSS) is test/bounds.test.ts.
import { describe, expect, it, vi } from "vitest";
import { InputGate } from "./input-gate.js";

describe("InputGate", () => {
  it("reports full past the soft bound, drops past the hard one, and reports drained below half", async () => {
    vi.useFakeTimers();
    try {
      let queued = 0;
      const reports: boolean[] = [];
      const gate = new InputGate(() => queued, { softBytes: 100, hardBytes: 200, pollMs: 10 }, (full) => reports.push(full));
      const write = (bytes: Uint8Array) => {
        queued += bytes.byteLength;
      };
      expect(gate.write(new Uint8Array(80), write)).toBe(true);
      expect(reports).toEqual([]);
      expect(gate.write(new Uint8Array(80), write)).toBe(true); // 160 > 100
      expect(reports).toEqual([true]);
      expect(gate.write(new Uint8Array(80), write)).toBe(false); // 240 > 200: dropped
      expect(queued).toBe(160);
      queued = 60; // the process took some: still above half the soft bound
      await vi.advanceTimersByTimeAsync(10);
      expect(reports).toEqual([true]);
      queued = 40;
      await vi.advanceTimersByTimeAsync(10);
      expect(reports).toEqual([true, false]);
      expect(gate.isFull).toBe(false);
      gate.dispose();
    } finally {
      vi.useRealTimers();
    }
  });
});
