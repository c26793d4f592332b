// HTTP server on Node's `http` module: /dear/* runs pbkdf2 (20 000 iterations), anything else
// answers a short string after --cheap-iterations of pbkdf2 (default 0).
//   node node_http.js --port 8080 [--cheap-iterations N]
const http = require('http');
const crypto = require('crypto');

function arg(name, fallback) {
  const at = process.argv.indexOf(name);
  return at < 0 ? fallback : Number(process.argv[at + 1]);
}

const cheapIterations = arg('--cheap-iterations', 0);
http.createServer((req, res) => {
  let body = 'cheap\n';
  if (req.url.startsWith('/dear/')) {
    body = crypto.pbkdf2Sync(req.url, 'salt', 20000, 32, 'sha256').toString('hex');
  } else if (cheapIterations > 0) {
    body = crypto.pbkdf2Sync(req.url, 'salt', cheapIterations, 32, 'sha256').toString('hex');
  }
  res.writeHead(200, { 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}).listen(arg('--port'), '127.0.0.1');
