// UI-side guard against double starts (core refuses too): one run per key.
export class Jobs {
  private running = new Set<string>();
  /** Runs `f` unless a job with `key` is running; returns undefined when refused. */
  async once<T>(key: string, f: () => Promise<T>): Promise<T | undefined> {
    if (this.running.has(key)) return undefined;
    this.running.add(key);
    try {
      return await f();
    } finally {
      this.running.delete(key);
    }
  }
  isRunning(key: string): boolean {
    return this.running.has(key);
  }
}

/** History: picking runs to compare keeps the two most recent picks. */
export function togglePick(picked: number[], id: number): number[] {
  if (picked.includes(id)) return picked.filter((x) => x !== id);
  return [...picked, id].slice(-2);
}
