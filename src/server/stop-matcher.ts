/**
 * `stop` strings over streamed text (OpenAI's `stop`): text is let out only once no stop string
 * can still begin in it, so a stop string split over several tokens is never half sent. push()
 * takes each token's text and returns what may be sent now; once a stop string completes,
 * `stopped` is true and what preceded it is the last text out. flush() ends a stream that
 * stopped for another reason (every held-back character is then plain text).
 */
export class StopMatcher {
  private held = '';
  stopped = false;

  constructor(private readonly stops: readonly string[]) {}

  push(text: string): string {
    if (this.stopped) return '';
    this.held += text;
    let cut = -1;
    for (const s of this.stops) {
      const at = this.held.indexOf(s);
      if (at >= 0 && (cut < 0 || at < cut)) cut = at;
    }
    if (cut >= 0) {
      this.stopped = true;
      const out = this.held.slice(0, cut);
      this.held = '';
      return out;
    }
    // Hold back the longest tail that is a prefix of some stop string.
    const keep = this.partialTail();
    const out = this.held.slice(0, this.held.length - keep);
    this.held = this.held.slice(this.held.length - keep);
    return out;
  }

  flush(): string {
    const out = this.stopped ? '' : this.held;
    this.held = '';
    return out;
  }

  private partialTail(): number {
    let keep = 0;
    for (const s of this.stops) {
      for (let n = Math.min(s.length - 1, this.held.length); n > keep; n--) {
        if (this.held.endsWith(s.slice(0, n))) {
          keep = n;
          break;
        }
      }
    }
    return keep;
  }
}
