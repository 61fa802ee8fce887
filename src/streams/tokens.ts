/**
 * Edge: engine.generate (async iterable) -> Observable<token>.
 *   concurrency 1: the next token is pulled only after the previous one was delivered
 *   buffer 0:      nothing is read ahead; a slow subscriber slows generation, never queues tokens
 *   teardown:      unsubscribe aborts the request (AbortSignal) and returns the iterator
 *   error:         the request's error (typed) is the stream's error
 */
import { Observable } from 'rxjs';

export function fromCancellable<T>(start: (signal: AbortSignal) => AsyncIterable<T>): Observable<T> {
  return new Observable<T>((subscriber) => {
    const controller = new AbortController();
    let iterator: AsyncIterator<T> | undefined;
    void (async () => {
      try {
        iterator = start(controller.signal)[Symbol.asyncIterator]();
        for (;;) {
          const r = await iterator.next();
          if (r.done || subscriber.closed) break;
          subscriber.next(r.value);
        }
        subscriber.complete();
      } catch (err) {
        // After an unsubscribe the abort surfaces here: nobody listens any more.
        if (!subscriber.closed) subscriber.error(err);
      }
    })();
    return () => {
      controller.abort();
      void iterator?.return?.(undefined);
    };
  });
}
