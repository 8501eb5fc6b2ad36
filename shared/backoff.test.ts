import { describe, expect, it } from "vitest";
import { backoffDelay } from "./backoff.js";

const low = (): number => 0;
const mid = (): number => 0.5;
/** The largest value Math.random may return. */
const high = (): number => 1 - Number.EPSILON;

describe("backoffDelay", () => {
  it("uses the defaults (base 100 ms, cap 5000 ms)", () => {
    expect(backoffDelay(0, { random: low })).toBe(50);
    expect(backoffDelay(0, { random: high })).toBeCloseTo(100, 6);
    expect(backoffDelay(100, { random: high })).toBeCloseTo(5000, 6);
    expect(backoffDelay(100, { random: high })).toBeLessThanOrEqual(5000);
  });

  it("stays within [baseMs / 2, min(maxMs, baseMs · 2^attempt)]", () => {
    const baseMs = 100;
    const maxMs = 5000;
    for (let attempt = 0; attempt <= 30; attempt++) {
      const ceiling = Math.min(maxMs, baseMs * 2 ** attempt);
      for (const r of [0, 0.1, 0.25, 0.5, 0.75, 0.9, 1 - Number.EPSILON]) {
        const delay = backoffDelay(attempt, { baseMs, maxMs, random: () => r });
        expect(delay, `attempt ${attempt}, random ${r}`).toBeGreaterThanOrEqual(baseMs / 2);
        expect(delay, `attempt ${attempt}, random ${r}`).toBeLessThanOrEqual(ceiling);
      }
    }
  });

  it("calls the injected random once per delay and scales linearly with it", () => {
    let calls = 0;
    const random = (): number => {
      calls++;
      return 0.5;
    };
    const a = backoffDelay(3, { baseMs: 100, maxMs: 10_000, random });
    expect(calls).toBe(1);
    // ceiling 800: 50 + 0.5 · 750
    expect(a).toBe(425);
    expect(backoffDelay(3, { baseMs: 100, maxMs: 10_000, random: low })).toBe(50);
    expect(backoffDelay(3, { baseMs: 100, maxMs: 10_000, random: () => 0.25 })).toBe(50 + 0.25 * 750);
  });

  it("grows exponentially until the cap", () => {
    const opts = { baseMs: 100, maxMs: 1_000_000, random: high };
    const ceilings = [0, 1, 2, 3, 4, 5].map((attempt) => backoffDelay(attempt, opts));
    expect(ceilings.map(Math.round)).toEqual([100, 200, 400, 800, 1600, 3200]);
    const mids = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((attempt) => backoffDelay(attempt, { ...opts, random: mid }));
    for (let i = 1; i < mids.length; i++) expect(mids[i]).toBeGreaterThan(mids[i - 1]);
  });

  it("is non-decreasing in attempt for a fixed random value", () => {
    for (const r of [0, 0.3, 0.7, 1 - Number.EPSILON]) {
      let previous = Number.NEGATIVE_INFINITY;
      for (let attempt = 0; attempt <= 40; attempt++) {
        const delay = backoffDelay(attempt, { baseMs: 100, maxMs: 5000, random: () => r });
        expect(delay).toBeGreaterThanOrEqual(previous);
        previous = delay;
      }
    }
  });

  it("caps at maxMs", () => {
    for (const attempt of [6, 7, 10, 20, 21, 50, 1000, Number.MAX_SAFE_INTEGER]) {
      const delay = backoffDelay(attempt, { baseMs: 100, maxMs: 5000, random: high });
      expect(delay).toBeLessThanOrEqual(5000);
      expect(delay).toBeCloseTo(5000, 6);
      expect(backoffDelay(attempt, { baseMs: 100, maxMs: 5000, random: mid })).toBeCloseTo(50 + 0.5 * (5000 - 50), 6);
    }
  });

  it("stays finite for huge attempt counts even with a huge cap", () => {
    const delay = backoffDelay(10_000, { baseMs: 100, maxMs: Number.MAX_VALUE, random: high });
    expect(Number.isFinite(delay)).toBe(true);
    // the exponent is clamped at 2^20
    expect(delay).toBeCloseTo(100 * 2 ** 20, 0);
  });

  it("never exceeds maxMs, even when maxMs is below baseMs / 2", () => {
    for (const r of [0, 0.5, 1 - Number.EPSILON]) {
      for (const attempt of [0, 1, 5, 30]) {
        const delay = backoffDelay(attempt, { baseMs: 100, maxMs: 10, random: () => r });
        expect(delay, `attempt ${attempt}, random ${r}`).toBeLessThanOrEqual(10);
        expect(delay, `attempt ${attempt}, random ${r}`).toBeGreaterThanOrEqual(0);
      }
    }
  });

  it("never returns a negative delay", () => {
    for (const attempt of [0, 1, 2, 10]) {
      for (const r of [0, 0.5, 1 - Number.EPSILON]) {
        expect(backoffDelay(attempt, { baseMs: 1, maxMs: 1, random: () => r })).toBeGreaterThanOrEqual(0);
        expect(backoffDelay(attempt, { baseMs: 0, maxMs: 100, random: () => r })).toBe(0);
      }
    }
  });
});
