/**
 * Operating errors of the bench harness (the bench is plain .mjs and does not reach into src/).
 */
export class BenchError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** The llama.cpp child crashed, timed out, or answered something that is not its reply. */
export class PeerRunError extends BenchError {
  constructor(modelPath, what, details = {}) {
    super('E_PEER_RUN', `llama.cpp on ${modelPath}: ${what}`);
    this.modelPath = modelPath;
    Object.assign(this, details);
  }
}

/** Something the bench needs is not there (a build, the bench install, a binding verb). */
export class BenchSetupError extends BenchError {
  constructor(what, fix) {
    super('E_BENCH_SETUP', `${what}; ${fix}`);
  }
}
