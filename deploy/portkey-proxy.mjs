// Node's global fetch (the undici inside Node 20) reads no proxy variable. Loaded with
// `node --import`, this makes it honour HTTP_PROXY / HTTPS_PROXY / NO_PROXY, as LiteLLM's
// Python clients do: undici's EnvHttpProxyAgent becomes the global dispatcher, which Node's
// own fetch uses too (the npm undici of the same major, 6, as Node 20's). `proxyTunnel:
// false`: a plain http:// provider is asked in absolute form through the proxy (as curl
// does), an https:// one through CONNECT. Portkey's code is not changed. Put this file
// beside the node_modules that holds undici 6 (npm install undici@6) and start Portkey
// with `node --import ./portkey-proxy.mjs .../start-server.js` (docs/gateways.md).
import { EnvHttpProxyAgent, setGlobalDispatcher } from 'undici';

const env = process.env;
if (env.HTTP_PROXY || env.http_proxy || env.HTTPS_PROXY || env.https_proxy) {
  const warn = process.emitWarning;
  // one warning silenced: undici's "EnvHttpProxyAgent is experimental"
  process.emitWarning = (w, ...rest) =>
    (rest[0]?.code ?? rest[1]) === 'UNDICI-EHPA' ? undefined : warn.call(process, w, ...rest);
  try {
    setGlobalDispatcher(new EnvHttpProxyAgent({ proxyTunnel: false }));
  } finally {
    process.emitWarning = warn;
  }
}
