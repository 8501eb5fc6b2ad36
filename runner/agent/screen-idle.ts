// The idle sweep (docs/architecture.md, "Idle screens"): one timer per thread, not one per
// screen, looks at every screen with an emulator and drops those unused for their `idleMs`
// (screen.ts, `drop`). One drop at a time: each makes a probe emulator to check its checkpoint,
// so a sweep over 500 idle screens holds one extra emulator at most.
import { log } from "../../shared/log.js";

/** What the sweep needs of a screen (screen.ts's TerminalScreen). */
export interface IdleScreen {
  readonly idleMs: number;
  idleFor(now: number): number;
  drop(): Promise<boolean>;
}

/** How often the sweep looks: half the shortest idle delay, within these bounds. */
const MIN_PERIOD_MS = 20;
const MAX_PERIOD_MS = 1000;

const screens = new Set<IdleScreen>();
let timer: NodeJS.Timeout | undefined;
let period = 0;
let sweeping = false;
let afterDrops: (() => void) | undefined;

/**
 * Runs `hook` after each sweep that dropped an emulator: the agent thread collects its heap there
 * (agent-worker.ts), else V8 keeps the dropped emulators' memory until its own next collection.
 */
export function onDropped(hook: (() => void) | undefined): void {
  afterDrops = hook;
}

/** Watches a screen with an emulator (again, after it was made again). */
export function watchIdle(screen: IdleScreen): void {
  screens.add(screen);
  const wanted = Math.max(MIN_PERIOD_MS, Math.min(MAX_PERIOD_MS, Math.floor(screen.idleMs / 2)));
  if (timer && wanted >= period) return;
  if (timer) clearInterval(timer);
  period = wanted;
  timer = setInterval(() => void sweep(), period);
  timer.unref(); // never holds the process open
}

/** Stops watching a screen (dropped or disposed); the timer stops with the last one. */
export function unwatchIdle(screen: IdleScreen): void {
  screens.delete(screen);
  if (screens.size > 0 || !timer) return;
  clearInterval(timer);
  timer = undefined;
  period = 0;
}

async function sweep(): Promise<void> {
  if (sweeping) return;
  sweeping = true;
  let dropped = 0;
  try {
    for (const screen of [...screens]) {
      if (!screens.has(screen) || screen.idleFor(Date.now()) < screen.idleMs) continue;
      try {
        if (await screen.drop()) dropped++;
      } catch (error) {
        log.warn("agent.screen", { outcome: "drop_failed", error });
      }
    }
    if (dropped > 0) afterDrops?.();
  } finally {
    sweeping = false;
  }
}
