// A typed event emitter small enough to run anywhere (Node's EventEmitter is not in browsers).
// A listener that throws is reported on the console and does not stop the others.

type Listener<A extends unknown[]> = (...args: A) => void;
type AnyListener = (...args: never[]) => void;

export class Emitter<Events extends Record<string, unknown[]>> {
  private readonly listeners = new Map<keyof Events, Set<AnyListener>>();

  on<K extends keyof Events>(event: K, listener: Listener<Events[K]>): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener as unknown as AnyListener);
    return () => this.off(event, listener);
  }

  off<K extends keyof Events>(event: K, listener: Listener<Events[K]>): void {
    this.listeners.get(event)?.delete(listener as unknown as AnyListener);
  }

  protected emit<K extends keyof Events>(event: K, ...args: Events[K]): void {
    for (const listener of [...(this.listeners.get(event) ?? [])]) {
      try {
        (listener as unknown as Listener<Events[K]>)(...args);
      } catch (error) {
        console.error(`ptybroker: a "${String(event)}" listener threw`, error);
      }
    }
  }
}
