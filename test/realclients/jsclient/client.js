// jsclient is an application written in JavaScript that leaves its flag
// configuration to flagplane: the OpenFeature server SDK
// (@openfeature/server-sdk) with flagd's provider (@openfeature/flagd-provider),
// built as `new FlagdProvider()` with no options, so that the provider reads
// the FLAGD_* variables of its environment and nothing else. It is the
// second language of the real-client tests (the Go one is ../sdkclient),
// run on the real node (test/realinstall) from the image
// test/realnode.JSClientAt builds: `make jsclient` installs package-lock.json
// into bin/jsclient with npm ci.
//
// Which flagd it reaches is what flagplane injected:
//
//   - a FeatureFlagSource's sidecar: FLAGD_RESOLVER=rpc and FLAGD_PORT (no
//     FLAGD_HOST: the provider's default, localhost, is the sidecar);
//   - an InProcessConfiguration: FLAGD_RESOLVER=in-process, FLAGD_HOST,
//     FLAGD_PORT, FLAGD_TLS, FLAGD_SOURCE_SELECTOR, ... of a sync endpoint
//     (a Flagd's sync port);
//   - FLAGD_OFFLINE_FLAG_SOURCE_PATH, a file the provider reads and watches.
//
// Usage: node client.js -flag <key> [-type boolean|string|number|object]
// [-interval 50ms] [-init-timeout 20s]. FLAG_KEY and FLAG_TYPE are read
// when the arguments leave them out. -from-env is accepted and changes
// nothing (the Go client needs it; this one is always configured by its
// environment).
//
// It writes the Go client's JSON lines to stdout: first
// {"event":"environment","flagd":{...}} with the FLAGD_* variables it saw,
// then {"event":"PROVIDER_READY","message":...} and the other provider
// events, and {"value":...,"variant":...,"reason":...,"errorCode":...}
// whenever the evaluation of the flag changes. When the provider cannot
// start it writes {"event":"init-failed","message":...} and exits with
// status 3.
'use strict';

const { OpenFeature, ProviderEvents } = require('@openfeature/server-sdk');
const { FlagdProvider } = require('@openfeature/flagd-provider');

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// args reads -name value, -name=value and --name value.
function args(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--?([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m) {
      throw new Error(`unexpected argument ${JSON.stringify(argv[i])}`);
    }
    if (m[1] === 'from-env') {
      out[m[1]] = 'true';
    } else if (m[2] !== undefined) {
      out[m[1]] = m[2];
    } else if (i + 1 < argv.length) {
      out[m[1]] = argv[++i];
    } else {
      throw new Error(`-${m[1]} needs a value`);
    }
  }
  return out;
}

// millis parses a Go-style duration: 50ms, 20s, 1m.
function millis(s) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(s);
  if (!m) {
    throw new Error(`bad duration ${JSON.stringify(s)}`);
  }
  return Number(m[1]) * { ms: 1, s: 1000, m: 60000 }[m[2]];
}

// evaluate evaluates the flag with the typed method of its type, as an
// application would.
function evaluate(client, key, type) {
  switch (type) {
    case 'boolean':
      return client.getBooleanDetails(key, false);
    case 'string':
      return client.getStringDetails(key, '');
    case 'number':
      return client.getNumberDetails(key, 0);
    case 'object':
      return client.getObjectDetails(key, {});
    default:
      throw new Error(`unknown flag type ${JSON.stringify(type)}`);
  }
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen in ${ms}ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const a = args(process.argv.slice(2));
  const key = a.flag || process.env.FLAG_KEY;
  const type = a.type || process.env.FLAG_TYPE || 'boolean';
  const interval = millis(a.interval || '50ms');
  const initTimeout = millis(a['init-timeout'] || '20s');
  if (!key) {
    throw new Error('no flag to evaluate: give -flag or FLAG_KEY');
  }

  const seen = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('FLAGD_')) {
      seen[k] = v;
    }
  }
  emit({ event: 'environment', flagd: seen });

  for (const t of [ProviderEvents.Ready, ProviderEvents.ConfigurationChanged, ProviderEvents.Error, ProviderEvents.Stale]) {
    OpenFeature.addHandler(t, (d) => emit({ event: t, message: (d && d.message) || '' }));
  }
  // The provider gives up its first connection after FLAGD_DEADLINE_MS
  // (500ms by default) and keeps reconnecting: a sync endpoint that comes up
  // a moment after the app (a Flagd created with it) is waited for, up to
  // -init-timeout, as the Go client waits.
  const began = Date.now();
  const ready = new Promise((resolve) => OpenFeature.addHandler(ProviderEvents.Ready, resolve));
  try {
    try {
      await withTimeout(OpenFeature.setProviderAndWait(new FlagdProvider()), initTimeout, 'the provider becoming ready');
    } catch (err) {
      await withTimeout(ready, Math.max(0, initTimeout - (Date.now() - began)), `the provider becoming ready after "${err && err.message}"`);
    }
  } catch (err) {
    emit({ event: 'init-failed', message: `starting the provider: ${err && err.message ? err.message : err}` });
    process.exit(3);
  }

  const client = OpenFeature.getClient();
  let last = '';
  for (;;) {
    const d = await evaluate(client, key, type);
    const line = JSON.stringify({ value: d.value, variant: d.variant ?? '', reason: d.reason ?? '', errorCode: d.errorCode ?? '' });
    if (line !== last) {
      last = line;
      process.stdout.write(line + '\n');
    }
    await sleep(interval);
  }
}

// As PID 1 of a container, a process that sets no handler ignores SIGTERM:
// the kubelet would wait out the grace period.
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => process.exit(0));
}

main().catch((err) => {
  emit({ event: 'init-failed', message: String(err && err.message ? err.message : err) });
  process.exit(3);
});
