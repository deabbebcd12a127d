/**
 * An unbounded async queue: the outgoing side of a bidirectional stream, written by many
 * handlers and read by the transport (as an async generator, which the transport requires).
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private wake: (() => void) | undefined;
  private closed = false;

  push(item: T): void {
    if (this.closed) return;
    this.items.push(item);
    this.wake?.();
  }

  /** Ends the iteration once the queued items are read. */
  close(): void {
    this.closed = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    try {
      for (;;) {
        const item = this.items.shift();
        if (item !== undefined) {
          yield item;
        } else if (this.closed) {
          return;
        } else {
          await new Promise<void>((resolve) => {
            this.wake = resolve;
          });
          this.wake = undefined;
        }
      }
    } finally {
      this.closed = true;
    }
  }
}
