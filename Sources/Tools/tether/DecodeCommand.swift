import TetherCore
import TetherJSON
import TetherSignalR
import TetherXML

/// `tether decode`: decodes captured traffic and prints one compact JSON line per message.
///
/// The input is fed to the decoder in chunks of `chunkSize` bytes; the output does not depend on
/// the chunk size. On the first error the command prints `{"error":"TEXT"}` and exits 1; an
/// unfinished message at the end of the input is the error "Message is incomplete.".
struct DecodeCommand {
    /// What the input holds.
    enum Format: String, CaseIterable {
        case signalRJSON = "signalr-json"
        case signalRMessagePack = "signalr-msgpack"
        case signalRHandshakeRequest = "signalr-handshake-request"
        case signalRHandshakeResponse = "signalr-handshake-response"
        case xmpp
    }

    static let defaultChunkSize = 65536

    var format: Format
    var chunkSize: Int = Self.defaultChunkSize

    /// Decodes `input`, passing each output line to `emit`; returns the exit status.
    func run(input: [UInt8], emit: (String) -> Void) -> Int32 {
        switch format {
        case .signalRJSON: runHub(JSONHubProtocol().makeParser(), input, emit)
        case .signalRMessagePack: runHub(MessagePackHubProtocol().makeParser(), input, emit)
        case .signalRHandshakeRequest:
            runHandshake(input, emit) { span throws(HubProtocolError) in
                try HandshakeRequest.parse(span).map { (CanonicalJSON.render($0.request), $0.consumed) }
            }
        case .signalRHandshakeResponse:
            runHandshake(input, emit) { span throws(HubProtocolError) in
                try HandshakeResponse.parse(span).map { (CanonicalJSON.render($0.response), $0.consumed) }
            }
        case .xmpp: runXMPP(input, emit)
        }
    }

    /// XMPP: one line per stream event; an input that simply ends is not an error (like a socket
    /// that went quiet).
    func runXMPP(_ input: [UInt8], _ emit: (String) -> Void) -> Int32 {
        var parser = XMLStreamParser()
        do throws(XMLStreamError) {
            for start in chunks(input) {
                parser.append(input.backDeployedSpan.extracting(start..<min(start + max(chunkSize, 1), input.count)))
                while let event = try parser.next() { emit(Self.line(for: event)) }
            }
        } catch {
            emit(#"{"event":"error","condition":"# + "\"\(error.condition.rawValue)\"}")
            return 1
        }
        return 0
    }

    static func line(for event: XMLStreamEvent) -> String {
        var out: [UInt8] = []
        switch event {
        case .streamOpen(let header):
            out.append(contentsOf: #"{"event":"stream-open","name":"#.utf8)
            JSONText.appendString(header.name.description, to: &out)
            out.append(contentsOf: #","attributes":{"#.utf8)
            for (index, attribute) in header.attributes.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.appendString(attribute.name.description, to: &out)
                out.append(UInt8(ascii: ":"))
                JSONText.appendString(attribute.value, to: &out)
            }
            out.append(contentsOf: "}}".utf8)
        case .element(let element):
            out.append(contentsOf: #"{"event":"element","xml":"#.utf8)
            JSONText.appendString(XMLSerializer.string(element), to: &out)
            out.append(UInt8(ascii: "}"))
        case .streamClose:
            out.append(contentsOf: #"{"event":"stream-close"}"#.utf8)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The chunks of `input`, in order.
    func chunks(_ input: [UInt8]) -> StrideTo<Int> {
        stride(from: 0, to: input.count, by: max(chunkSize, 1))
    }

    func runHub<Parser: HubMessageParser>(_ parser: Parser, _ input: [UInt8], _ emit: (String) -> Void) -> Int32 {
        var parser = parser
        do throws(HubProtocolError) {
            for start in chunks(input) {
                parser.append(input.backDeployedSpan.extracting(start..<min(start + max(chunkSize, 1), input.count)))
                while let message = try parser.next() {
                    do {
                        emit(try CanonicalJSON.render(message))
                    } catch {
                        // A value with no JSON rendering (map keys nested too deeply).
                        emit(CanonicalJSON.renderError(error.message))
                        return 1
                    }
                }
            }
            if parser.hasPartialMessage { throw HubProtocolError.incomplete }
        } catch {
            emit(CanonicalJSON.renderError(error.message))
            return 1
        }
        return 0
    }

    func runHandshake(
        _ input: [UInt8],
        _ emit: (String) -> Void,
        _ parse: (Span<UInt8>) throws(HubProtocolError) -> (String, Int)?
    ) -> Int32 {
        var pending: [UInt8] = []
        do throws(HubProtocolError) {
            for start in chunks(input) {
                pending.append(contentsOf: input[start..<min(start + max(chunkSize, 1), input.count)])
                while let (line, consumed) = try parse(pending.backDeployedSpan) {
                    emit(line)
                    pending.removeFirst(consumed)
                }
            }
            if !pending.isEmpty { throw HubProtocolError.incomplete }
        } catch {
            emit(CanonicalJSON.renderError(error.message))
            return 1
        }
        return 0
    }
}
