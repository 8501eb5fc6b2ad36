// The egress networks' fifo pairs made ahead (fifo-stock.ts): each pair is two real fifos, 0600, in
// a 0700 folder of its own; a pair is handed out once; the stock refills in the background when
// it runs low and stays bounded; closing removes what was not taken.
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { FifoStock, type FifoPair } from "./fifo-stock.js";
import { systemTool } from "./launch.js";

const dir = mkdtempSync(join(tmpdir(), "fifo-stock-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const mkfifo = systemTool("mkfifo");
if (!mkfifo) throw new Error("mkfifo (coreutils) is required for this test");

/** Resolves on the stock's next background refill. */
function refilled(stock: FifoStock): Promise<void> {
  return new Promise((resolve) => {
    stock.onRefilled = () => {
      stock.onRefilled = null;
      resolve();
    };
  });
}

function expectPair(pair: FifoPair): void {
  expect(statSync(pair.folder).mode & 0o777).toBe(0o700);
  for (const path of [pair.info, pair.go]) {
    const stat = statSync(path);
    expect(stat.isFIFO()).toBe(true);
    expect(stat.mode & 0o777).toBe(0o600);
  }
  expect(readdirSync(pair.folder).sort()).toEqual(["go", "info"]);
}

describe("the fifo stock", () => {
  it("makes a pair at once when empty, then keeps `size` made ahead and hands each out once", async () => {
    const run = mkdtempSync(join(dir, "run-"));
    const stock = new FifoStock(run, mkfifo, 4);
    expect(stock.stocked).toBe(0);
    const first = stock.take(); // empty: made now; the stock is low, so it refills behind
    expectPair(first);
    await refilled(stock);
    expect(stock.stocked).toBe(4);
    expect(readdirSync(run)).toHaveLength(5);

    const taken = [first];
    // Down to a quarter (1 of 4) refills; until then, takes spawn nothing.
    for (let i = 0; i < 2; i++) taken.push(stock.take());
    expect(stock.stocked).toBe(2);
    const refill = refilled(stock);
    taken.push(stock.take());
    expect(stock.stocked).toBe(1);
    await refill;
    expect(stock.stocked).toBe(4);
    for (const pair of taken) expectPair(pair);
    expect(new Set(taken.map((p) => p.folder)).size).toBe(taken.length);
    stock.close();
  });

  it("close removes the pairs not taken; a take after it still gets a pair, and nothing is made ahead", async () => {
    const run = mkdtempSync(join(dir, "run-"));
    const stock = new FifoStock(run, mkfifo, 4);
    const ready = refilled(stock);
    stock.refill();
    await ready;
    const kept = stock.take();
    stock.close();
    expect(stock.stocked).toBe(0);
    expect(readdirSync(run)).toEqual([kept.folder.slice(run.length + 1)]);
    const late = stock.take();
    expectPair(late);
    stock.refill();
    expect(stock.stocked).toBe(0);
    expect(existsSync(kept.folder)).toBe(true); // a taken pair is its session's to remove
  });
});
