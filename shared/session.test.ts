import { describe, expect, it } from "vitest";
import { SESSION_STATUSES, type SessionStatus, canMove, isTerminal } from "./session.js";

const TERMINAL: readonly SessionStatus[] = ["exited", "lost", "failed"];

/** The lifecycle spelled out by hand: starting → running → exited | lost | failed. */
const ALLOWED: ReadonlySet<string> = new Set([
  "starting→running",
  "starting→exited",
  "starting→lost",
  "starting→failed",
  "running→exited",
  "running→lost",
  "running→failed",
]);

describe("isTerminal", () => {
  it.each(SESSION_STATUSES)("%s", (status) => {
    expect(isTerminal(status)).toBe(TERMINAL.includes(status));
  });

  it("knows exactly five statuses", () => {
    expect([...SESSION_STATUSES].sort()).toEqual(["exited", "failed", "lost", "running", "starting"]);
  });
});

describe("canMove", () => {
  const pairs = SESSION_STATUSES.flatMap((from) => SESSION_STATUSES.map((to) => [from, to] as const));

  it("covers all 25 pairs", () => {
    expect(pairs).toHaveLength(25);
  });

  it.each(pairs)("%s → %s", (from, to) => {
    expect(canMove(from, to)).toBe(ALLOWED.has(`${from}→${to}`));
  });

  it.each(SESSION_STATUSES)("refuses staying in %s", (status) => {
    expect(canMove(status, status)).toBe(false);
  });

  it.each(TERMINAL)("refuses every move out of terminal %s", (from) => {
    for (const to of SESSION_STATUSES) expect(canMove(from, to), `${from} → ${to}`).toBe(false);
  });

  it("refuses moving backward", () => {
    expect(canMove("running", "starting")).toBe(false);
    for (const from of TERMINAL) {
      expect(canMove(from, "running")).toBe(false);
      expect(canMove(from, "starting")).toBe(false);
    }
  });
});
