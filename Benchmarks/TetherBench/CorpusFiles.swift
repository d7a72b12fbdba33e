import Foundation
import TetherCore
import TetherSignalR
import TetherXML

/// The corpus as files (`signalr.json.bin`, `signalr.msgpack.bin`, `xmpp.xml`; the format is in
/// `Benchmarks/README.md`): `tether-bench --write-corpus DIR` writes the generated one, and
/// `tether-bench --corpus DIR` reads such files (from this or another generator), so that other
/// libraries can be measured on the very same bytes. The messages' shapes and payloads (for the
/// encode rows) and the counts are read back from the files with Tether's own decoders.
enum CorpusFiles {
    /// Writes the generated corpus (each stream about `targetBytes` long) to `directory`.
    static func write(to directory: String, targetBytes: Int) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let signalR = SignalRCorpus(targetBytes: targetBytes)
        let xmpp = XMPPCorpus(targetBytes: targetBytes)
        for (name, bytes) in [
            ("signalr.json.bin", signalR.json), ("signalr.msgpack.bin", signalR.messagePack), ("xmpp.xml", xmpp.stream),
        ] {
            let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
            guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
                throw BenchError("cannot write \(path)")
            }
        }
    }

    static func read(_ directory: String, _ name: String) throws -> [UInt8] {
        let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
        guard let data = FileManager.default.contents(atPath: path) else {
            throw BenchError("cannot read \(path) (make it with tether-bench --write-corpus \(directory))")
        }
        return [UInt8](data)
    }
}

extension SignalRCorpus {
    /// The SignalR corpus of `directory`: the JSON and MessagePack streams as they are.
    init(directory: String) throws {
        json = try CorpusFiles.read(directory, "signalr.json.bin")
        messagePack = try CorpusFiles.read(directory, "signalr.msgpack.bin")
        var parser = JSONHubProtocol().makeParser()
        parser.append(json.backDeployedSpan)
        while let message = try parser.next() {
            switch message {
            case .invocation(let invocation):
                guard invocation.arguments.count == 1 else {
                    throw BenchError(
                        "an Invocation in signalr.json.bin has \(invocation.arguments.count) arguments, not 1"
                    )
                }
                payloads.append(try invocation.arguments.decode(ParamData.self, at: 0))
                shapes.append((.invocation, invocation.invocationId, invocation.target))
                counts[.invocation, default: 0] += 1
            case .completion(let completion):
                guard case .value(let value) = completion.result else {
                    throw BenchError("a Completion in signalr.json.bin carries no result")
                }
                payloads.append(try value.decode(ParamData.self))
                shapes.append((.completion, completion.invocationId, ""))
                counts[.completion, default: 0] += 1
            case .streamItem(let item):
                payloads.append(try item.item.decode(ParamData.self))
                shapes.append((.streamItem, item.invocationId, ""))
                counts[.streamItem, default: 0] += 1
            case .ping:
                shapes.append((.ping, nil, ""))
                counts[.ping, default: 0] += 1
            case .streamInvocation, .cancelInvocation, .close, .ack, .sequence:
                throw BenchError("signalr.json.bin holds a message the corpus format has not: \(message)")
            }
            messageCount += 1
        }
        var frames = MessagePackHubProtocol().makeParser()
        frames.append(messagePack.backDeployedSpan)
        var frameCount = 0
        while try frames.next() != nil { frameCount += 1 }
        guard frameCount == messageCount else {
            throw BenchError("signalr.msgpack.bin holds \(frameCount) messages, signalr.json.bin \(messageCount)")
        }
    }
}

extension XMPPCorpus {
    /// The XMPP corpus of `directory`: the stream as it is (header, features, stanzas, footer).
    init(directory: String) throws {
        stream = try CorpusFiles.read(directory, "xmpp.xml")
        guard stream.starts(with: Array("<?xml".utf8)),
            stream.suffix(Self.footer.utf8.count).elementsEqual(Self.footer.utf8)
        else {
            throw BenchError("xmpp.xml does not start with <?xml and end with \(Self.footer)")
        }
        var parser = XMLStreamParser()
        var offset = 0
        while offset < stream.count {
            // In 64 KiB reads, as a socket delivers them (the parser's element limit counts what
            // is buffered).
            let end = min(offset + 65536, stream.count)
            parser.append(stream[offset..<end].span)
            offset = end
            while let event = try parser.next() {
                guard case .element(let element) = event else { continue }
                let kind: String
                switch element.localName {
                case "message", "presence": kind = element.localName
                case "iq": kind = element.firstChild("ping") != nil ? "iq-ping" : "iq-roster"
                default: continue  // stream:features
                }
                counts[kind, default: 0] += 1
                stanzaCount += 1
            }
        }
    }
}
