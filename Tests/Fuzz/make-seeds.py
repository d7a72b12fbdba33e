#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora into Tests/Fuzz/Seeds/TARGET/ (committed).

Sources: the conformance vectors in Specs/signalr/*.json (messages, streams, errors, handshakes,
negotiate bodies, framing), records cut from a small corpus of the benchmark's generator (pass its
output directory, made with `swift run -c release tether-bench --write-corpus DIR --size 0.02`), and
hand-written inputs for the targets no vector covers (WebSocket frames, HTTP responses, SCRAM
server messages, TLS records, XMPP streams, machine operation sequences).

Each seed starts with the byte(s) the target reads as choices (the split of the stream, the
decoder), as that target's main.swift describes.

    python3 Tests/Fuzz/make-seeds.py [GEN_CORPUS_DIR]
"""
import json
import os
import shutil
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SEEDS = os.path.join(ROOT, "Tests", "Fuzz", "Seeds")
SPECS = os.path.join(ROOT, "Specs", "signalr")
RS = b"\x1e"


def load(name):
    with open(os.path.join(SPECS, name)) as f:
        return json.load(f)


def write(target, seeds):
    folder = os.path.join(SEEDS, target)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    unique = []
    for seed in seeds:
        if seed not in unique:
            unique.append(seed)
    for index, seed in enumerate(unique):
        with open(os.path.join(folder, "seed%03d" % index), "wb") as f:
            f.write(seed)
    print("%-28s %4d seeds" % (target, len(unique)))


def hexbytes(text):
    return bytes.fromhex(text.replace(" ", ""))


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def records(data, separator):
    return [part + separator for part in data.split(separator) if part]


def msgpack_frames(data):
    frames, offset = [], 0
    while offset < len(data):
        size, shift, start = 0, 0, offset
        while True:
            byte = data[offset]
            offset += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        frames.append(data[start:offset + size])
        offset += size
    return frames


def main():
    corpus = sys.argv[1] if len(sys.argv) > 1 else None
    json_messages = load("json-messages.json")
    msgpack_messages = load("msgpack-messages.json")
    handshake = load("handshake.json")
    negotiate = load("negotiate.json")

    # JSON hub protocol: [split seed] + stream.
    texts = [m["text"].encode() + RS for m in json_messages["messages"]]
    texts += [m["input"].encode() for m in json_messages["streams"]]
    texts += [m["text"].encode() + RS for m in json_messages["errors"]]
    bench_json = records(open(os.path.join(corpus, "signalr.json.bin"), "rb").read(), RS)[:24] if corpus else []
    json_streams = texts + bench_json + [b"".join(bench_json[:6])]
    write("FuzzJSONHubProtocol", [bytes([i % 4]) + s for i, s in enumerate(json_streams)])

    # MessagePack hub protocol: [split seed] + VarInt-framed stream.
    frames = []
    for m in msgpack_messages["messages"] + msgpack_messages["errors"]:
        payload = hexbytes(m["hex"])
        frames.append(varint(len(payload)) + payload)
    frames += [hexbytes(m["hex"]) for m in msgpack_messages["streams"]]
    bench_msgpack = msgpack_frames(open(os.path.join(corpus, "signalr.msgpack.bin"), "rb").read())[:24] if corpus else []
    msgpack_streams = frames + bench_msgpack + [b"".join(bench_msgpack[:6])]
    write("FuzzMessagePackHubProtocol", [bytes([i % 4]) + s for i, s in enumerate(msgpack_streams)])

    # MessagePack values: the payloads of those frames and their arguments arrays.
    values = []
    for frame in frames + bench_msgpack:
        size, shift, offset = 0, 0, 0
        while offset < len(frame):
            byte = frame[offset]
            offset += 1
            if not byte & 0x80:
                break
        values.append(frame[offset:])
    values += [b"\x93\x01\xa3abc\xc0", b"\x82\xa4name\xa3bob\xa5count\x07", b"\xd6\xff\x00\x00\x00\x01", b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00"]
    write("FuzzMessagePackValue", values)

    # JSON values: [cut] + value.
    json_values = [b'{"name":"Alice","count":3,"note":null}', b'[1,-2.5e3,"\\u00e9\\ud83d\\ude00",true,false,null]',
                   b'{"a":{"b":[{"c":"\\"\\\\\\/\\b\\f\\n\\r\\t"}]}}', "\"Zoë 日本語 😀\"".encode(), b"  123456789012345678901234567890  "]
    for record in bench_json[:12]:
        start = record.find(b'"arguments":[')
        if start >= 0:
            json_values.append(record[start + len(b'"arguments":'):-2])
    write("FuzzJSONValue", [bytes([7 + 13 * i]) + v for i, v in enumerate(json_values)])

    # Handshake and negotiate: [selector] + bytes.
    hs = [bytes([0]) + r["input"].encode() for r in handshake["requests"] + handshake["requestErrors"]]
    hs += [bytes([1]) + r["input"].encode() for r in handshake["responses"] + handshake["responseErrors"] + handshake["responseThenMessages"]]
    hs += [bytes([2]) + r["body"].encode() for r in negotiate["responses"] + negotiate["redirects"] + negotiate["errors"]]
    write("FuzzHandshakeNegotiate", hs)

    # XML streams: [split seed] + an XMPP stream (features, SASL success and a restart, stanzas).
    header = (b"<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'"
              b" id='s1' from='example.com' version='1.0' xml:lang='en'>")
    features = (b"<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-1</mechanism>"
                b"<mechanism>PLAIN</mechanism></mechanisms></stream:features>")
    success = b"<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>"
    stanzas = [b"<message from='bob@example.com/x' to='alice@example.com' type='chat' id='m1'><body>hi &amp; bye</body></message>",
               b"<presence from='bob@example.com/x'><show>away</show></presence>",
               b"<iq type='result' id='r1'><query xmlns='jabber:iq:roster'><item jid='bob@example.com' subscription='both'/></query></iq>",
               b"<stream:error><conflict xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error></stream:stream>"]
    xml = [header + features + success + header + s for s in stanzas]
    if corpus:
        xmpp = open(os.path.join(corpus, "xmpp.xml"), "rb").read()
        xml.append(xmpp[:6000])
    old = os.path.join(SEEDS, "FuzzXMLStream")
    kept = [open(os.path.join(old, n), "rb").read() for n in sorted(os.listdir(old))] if os.path.isdir(old) else []
    write("FuzzXMLStream", kept + [bytes([i * 37 % 256]) + s for i, s in enumerate(xml)])

    # SCRAM: [mechanism, options] + server-first + 0 + server-final (RFC 5802 / 7677 exchanges;
    # options: channel binding none / y / tls-exporter, and whether XEP-0474's h= is checked).
    scram = [bytes([1, 0]) + b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096\x00v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
             bytes([2, 0]) + b"r=rOprNGfwEbeRWgbNEkqOfyDjhQ7Y,s=QSXCR+Q6sek8bf92,i=4096\x00v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
             bytes([0, 0]) + b"r=rOprNGfwEbeRWgbNEkqOabc,s=c2FsdA==,i=16,e=other\x00e=invalid-proof",
             bytes([1, 0]) + b"m=ext,r=rOprNGfwEbeRWgbNEkqOx,s=AAAA,i=1\x00v=",
             bytes([1, 2]) + b"r=rOprNGfwEbeRWgbNEkqOcb,s=c2FsdA==,i=16\x00v=AAAA",
             bytes([1, 13]) + b"r=rOprNGfwEbeRWgbNEkqOh,s=c2FsdA==,i=16,h=AAAA\x00v=AAAA"]
    write("FuzzSCRAM", scram)

    # WebSocket: [selector] + frames (after a valid 101 when the selector's high bit is clear).
    def frame(opcode, payload, fin=True, mask=None):
        head = bytes([(0x80 if fin else 0) | opcode])
        n = len(payload)
        length = bytes([n]) if n < 126 else (bytes([126]) + struct.pack(">H", n) if n < 65536 else bytes([127]) + struct.pack(">Q", n))
        if mask is not None:
            length = bytes([length[0] | 0x80]) + length[1:]
            return head + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return head + length + payload
    ws = [bytes([1]) + frame(1, b'{"type":6}\x1e'),
          bytes([2]) + frame(1, b"frag", fin=False) + frame(0x9, b"p") + frame(0, b"ment"),
          bytes([3]) + frame(2, bytes(range(200))) + frame(0x8, b"\x03\xe8bye"),
          bytes([0]) + frame(1, b"\xff\xfe") + frame(0xA, b""),
          bytes([1]) + frame(1, b"masked", mask=b"abcd"),
          bytes([0x80]) + b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n"]
    write("FuzzWebSocket", ws)

    # HTTP responses: [selector] + response.
    http = [b"\x01HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
            b"\x02HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\nTrailer: t\r\n\r\n",
            b"\x03HTTP/1.0 404 Not Found\r\n\r\nno body length, read until close",
            b"\x81HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
            b"\x00HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
            b"\x02HTTP/1.1 307 Temporary Redirect\r\nLocation: https://example.com/x\r\nContent-Length: 0\r\n\r\n"]
    write("FuzzHTTPResponse", http)

    # Server-Sent Events: [split and limit selector] + stream.
    sse = [b"\x3fdata: {\"type\":6}\x1e\r\n\r\n",
           b"\x05\xef\xbb\xbf: hi\r\nevent: x\rid: 1\rdata: a\rdata: b\r\rretry: 100\n\n",
           b"\x12data:one\ndata\n: c\ndata:  two\n\ndata: cut",
           b"\x00data: 0123456789abcdef0123456789\n\n"]
    write("FuzzServerSentEvents", sse)

    # DNS responses: [limits selector] + message.
    def name(text):
        return b"".join(bytes([len(label)]) + label.encode() for label in text.split(".")) + b"\x00"
    def rr(owner, rtype, data):
        return owner + struct.pack(">HHIH", rtype, 1, 300, len(data)) + data
    head = struct.pack(">HHHHHH", 0x1234, 0x8180, 1, 3, 0, 0)
    srv_q = name("_xmpp-client._tcp.example.com") + struct.pack(">HH", 33, 1)
    srv = rr(b"\xc0\x0c", 33, struct.pack(">HHH", 10, 60, 5222) + b"\x04xmpp\xc0\x1e")
    cname = rr(b"\x04xmpp\xc0\x1e", 5, name("host.example.net"))
    a = rr(name("host.example.net"), 1, bytes([192, 0, 2, 1]))
    dns = [bytes([0xff]) + head + srv_q + srv + cname + a,
           bytes([0x11]) + struct.pack(">HHHHHH", 1, 0x8383, 1, 0, 0, 0) + srv_q,
           bytes([0x22]) + struct.pack(">HHHHHH", 2, 0x8380, 1, 1, 0, 0) + srv_q + rr(b"\xc0\x0c", 33, struct.pack(">HHH", 0, 0, 0) + b"\x00"),
           bytes([0x07]) + struct.pack(">HHHHHH", 3, 0x8180, 1, 1, 0, 0) + b"\xc0\x0c\x00\x01\x00\x01"]
    write("FuzzDNSMessage", dns)

    # TLS: [split seed] + records where the server's flight belongs.
    tls = [bytes([1]) + b"\x16\x03\x03\x00\x04\x02\x00\x00\x00",
           bytes([2]) + b"\x15\x03\x03\x00\x02\x02\x28",
           bytes([3]) + b"\x16\x03\x03\x00\x30\x02\x00\x00\x2c\x03\x03" + bytes(32) + b"\x00\x13\x01\x00\x00\x04\x00\x2b\x00\x02",
           bytes([0]) + b"\x17\x03\x03\x00\x05hello",
           bytes([1]) + b"HTTP/1.1 400 Bad Request\r\n\r\n"]
    write("FuzzTLSRecords", tls)

    # Machines: operation sequences (see their main.swift for what each byte does).
    hub = [bytes([0, 0, 2, 4, 6, 9, 10, 22, 38, 5, 15, 0, 2, 4, 6]),
           bytes([1, 0, 2, 4, 6, 9, 9, 54, 5, 15, 31, 47, 2, 4, 6, 118, 134]),
           bytes([2, 0, 2, 4, 6, 12, 14, 46, 78, 1, 15]),
           bytes([3, 0, 3, 0, 2, 4, 6, 13, 102, 133, 132, 15, 15, 15])]
    write("FuzzHubConnection", hub)
    xmpp = [bytes([0, 3, 7, 11, 0, 7, 11, 8, 7, 11, 10, 15, 0, 7, 13, 14, 15, 0, 200]),
            bytes([4, 3, 7, 11, 8, 7, 11, 10, 13, 12, 23, 4, 15, 0, 10, 3, 7]),
            bytes([8, 3, 7, 11, 8, 7, 11, 10, 39, 13, 15, 0, 100, 1]),
            bytes([1, 3, 7, 79, 6, 7, 11, 8, 5, 15, 0, 50]),
            bytes([2, 3, 7, 11, 8, 7, 11, 10, 11, 5]) + b"<iq/>" + bytes([4, 15, 0, 30, 3]),
            # The catch-up with a position, carbons and push: archive results and pages (27, 59, 91).
            bytes([0x78, 3, 7, 11, 0, 7, 11, 8, 7, 11, 10, 15, 0, 27, 1, 27, 2, 59, 2, 27, 3, 91, 0, 15, 0, 200])]
    write("FuzzXMPPClient", xmpp)
    http = [bytes.fromhex("10 00 00 01 05 04 00 00 04 01 00 08 01 06 00 00 06 00 01 08 00"),
            bytes.fromhex("11 00 00 01 03 02 04 04 00 00 08 00 04 00 00 06 00 06 08 00 09 01 03 00"),
            bytes.fromhex("13 00 00 01 07 04 00 04"),
            bytes.fromhex("10 00 00 04 20 00 01 02 06 00 00 03 00")]
    write("FuzzHTTPTransport", http)
    resolver = [bytes.fromhex("03 00 05 02 00 00 00 00 0d 08 ff 02 41 00 00"),
                bytes.fromhex("00 00 00 02 00 02 00 05 00 06 00 00"),
                bytes.fromhex("02 00 00 02 00 20 00 08 ff 08 ff 08 ff"),
                bytes.fromhex("01 00 00 00 04 01 00 04 10 07 01 08 ff")]
    write("FuzzDNSResolver", resolver)


if __name__ == "__main__":
    main()
