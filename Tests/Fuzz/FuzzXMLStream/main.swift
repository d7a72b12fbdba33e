// libFuzzer target: the XML stream parser (small limits, so that they are hit, three events
// parsed ahead at most, so that Expat is suspended and resumed; a stream restart after
// `<success/>` as after SASL, cutting what was parsed ahead) and the XMPP views over what it yields. The first
// byte picks the split. Invariants: any split of the stream gives the same events and the same
// error condition as the whole stream (where a limit is broken as well as the syntax, either);
// every element serializes to text that parses back to an equal element; the same element built
// again in code from its names and strings is equal and serializes to the same text (so the
// optimized build's string and serializer paths are checked too, which the debug-built unit
// tests cannot be); its views never crash. And the parser's own namespace processing agrees with
// Expat's (`ExpatNamespaces`): the same names for every element and attribute, and a failure
// where Expat fails.
import CExpat
import FuzzSupport
import TetherCore
import TetherXML
import TetherXMPP

/// The events, then the error that ended the stream. Outcomes compare by the error's stream
/// error condition (what the client closes the stream with), not by Expat's diagnostic text,
/// which can name the same fault differently depending on where the bytes were cut.
struct Outcome: Equatable {
    var events: [XMLStreamEvent] = []
    var error: XMLStreamError?

    static func == (lhs: Outcome, rhs: Outcome) -> Bool {
        lhs.events == rhs.events && lhs.error?.condition == rhs.error?.condition
    }
}

func run(_ pieces: [ArraySlice<UInt8>], restarted: inout Bool) -> Outcome {
    var parser = XMLStreamParser(
        configuration: .init(
            maximumElementSize: 2048,
            maximumDepth: 8,
            maximumAttributes: 8,
            maximumElements: 64,
            maximumEventsAhead: 3
        )
    )
    var outcome = Outcome()
    for piece in pieces {
        parser.append(piece)
        while true {
            let event: XMLStreamEvent?
            do {
                event = try parser.next()
            } catch {
                outcome.error = error
                return outcome
            }
            guard let event else { break }
            outcome.events.append(event)
            if case .element(let element) = event {
                checkRoundTrip(element)
                _ = StreamFeatures(element)?.mechanisms
                _ = StreamError(element)?.condition
                _ = Stanza(element)?.from
                _ = SASLElement(element)
                if element.localName == "success", !restarted {
                    restarted = true
                    let rest = parser.restart()
                    parser.append(rest)
                }
            }
        }
    }
    return outcome
}

/// The element built again through the public initializer, from its names, attribute values and
/// text as `String`s, children included.
func rebuilt(_ element: XElement) -> XElement {
    XElement(
        element.name,
        attributes: element.attributes,
        namespaceDeclarations: element.namespaceDeclarations,
        children: element.childNodes.map { child in
            switch child {
            case .element(let child): .element(rebuilt(child))
            case .text(let text): .text(text)
            }
        }
    )
}

/// A stream header with no default namespace: the scope `XMLSerializer.string` writes for.
let streamOpen = Array("<stream:stream xmlns:stream='http://etherx.jabber.org/streams'>".utf8)

func checkRoundTrip(_ element: XElement) {
    let text = XMLSerializer.string(element)
    var parser = XMLStreamParser()
    parser.append(streamOpen + Array(text.utf8))
    var reparsed: XElement?
    do {
        while let event = try parser.next() {
            if case .element(let element) = event { reparsed = element }
        }
    } catch {
        require(false, "the serialization of an element does not parse (\(error)): \(text)")
    }
    require(reparsed == element, "the serialization of an element parses to another element: \(text)")
    let again = rebuilt(element)
    require(again == element, "an element built again from its strings differs: \(text)")
    let againText = XMLSerializer.string(again)
    require(againText == text, "an element built again serializes differently: \(againText) against \(text)")
}

/// What Expat's own namespace processing (namespace triplets) makes of a stream: the names of
/// each element and of its attributes, in document order, until the root element ends, and
/// whether Expat failed. Comments, processing instructions and DTDs fail, as they do in the
/// stream parser.
final class ExpatNamespaces {
    var starts: [[XMLName]] = []
    var failed = false
    /// Where Expat failed (a byte offset in the stream).
    var failure = 0
    var depth = 0
    var parser: XML_Parser?

    static func name(_ raw: UnsafePointer<CChar>) -> XMLName {
        let parts = unsafe String(cString: raw).split(separator: "\u{1F}", omittingEmptySubsequences: false)
        switch parts.count {
        case 1: return XMLName(String(parts[0]))
        case 2: return XMLName(String(parts[1]), namespace: String(parts[0]))
        default: return XMLName(String(parts[1]), namespace: String(parts[0]), prefix: String(parts[2]))
        }
    }

    init(_ bytes: [UInt8]) {
        guard let parser = unsafe XML_ParserCreateNS("UTF-8", 0x1F) else { fatalError("no parser") }
        unsafe self.parser = parser
        defer { unsafe XML_ParserFree(parser) }
        unsafe XML_SetReturnNSTriplet(parser, 1)
        _ = unsafe cexpat_disable_reparse_deferral(parser)
        unsafe XML_SetUserData(parser, Unmanaged.passUnretained(self).toOpaque())
        unsafe XML_SetElementHandler(
            parser,
            { userData, name, attributes in
                let reference = unsafe Unmanaged<ExpatNamespaces>.fromOpaque(userData!).takeUnretainedValue()
                var names = [unsafe ExpatNamespaces.name(name!)]
                var index = 0
                while let attribute = unsafe attributes?[index] {
                    unsafe names.append(ExpatNamespaces.name(attribute))
                    index += 2
                }
                reference.starts.append(names)
                reference.depth += 1
            },
            { userData, _ in
                let reference = unsafe Unmanaged<ExpatNamespaces>.fromOpaque(userData!).takeUnretainedValue()
                reference.depth -= 1
                // Nothing after the root's end is parsed (as in the stream parser).
                if reference.depth == 0 { _ = unsafe XML_StopParser(reference.parser, 1) }
            }
        )
        unsafe XML_SetCommentHandler(parser) { userData, _ in ExpatNamespaces.refuse(userData) }
        unsafe XML_SetProcessingInstructionHandler(parser) { userData, _, _ in ExpatNamespaces.refuse(userData) }
        unsafe XML_SetStartDoctypeDeclHandler(parser) { userData, _, _, _, _ in ExpatNamespaces.refuse(userData) }
        if expatParse(parser, bytes, final: false) == XML_STATUS_ERROR {
            failed = true
            failure = Int(unsafe XML_GetCurrentByteIndex(parser))
        }
        unsafe self.parser = nil
    }

    /// What RFC 6120 restricts (a comment, a processing instruction, a DTD) fails the stream.
    static func refuse(_ userData: UnsafeMutableRawPointer?) {
        let reference = unsafe Unmanaged<ExpatNamespaces>.fromOpaque(userData!).takeUnretainedValue()
        reference.failed = true
        _ = unsafe XML_StopParser(reference.parser, 0)
    }
}

/// Feeds all of `bytes` to `parser` in one call.
func expatParse(_ parser: XML_Parser, _ bytes: [UInt8], final: Bool) -> XML_Status {
    unsafe bytes.withUnsafeBufferPointer { buffer in
        unsafe XML_Parse(
            parser,
            UnsafeRawPointer(buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!).assumingMemoryBound(to: CChar.self),
            Int32(buffer.count),
            final ? 1 : 0
        )
    }
}

/// Where the token the stream ends in starts, if it ends inside one (a tag, a reference, a
/// character cut short; a name in the prolog that a space would end): as Expat without namespaces
/// (as the stream parser reads) tells, given the input as final or followed by a space.
func unfinishedTokenStart(_ stream: [UInt8]) -> Int? {
    func parse(_ bytes: [UInt8], final: Bool) -> (XML_Error, Int)? {
        guard let parser = unsafe XML_ParserCreate("UTF-8") else { fatalError("no parser") }
        defer { unsafe XML_ParserFree(parser) }
        guard expatParse(parser, bytes, final: final) == XML_STATUS_ERROR else { return nil }
        return (unsafe XML_GetErrorCode(parser), Int(unsafe XML_GetCurrentByteIndex(parser)))
    }
    if let (code, offset) = parse(stream, final: true),
        code == XML_ERROR_UNCLOSED_TOKEN || code == XML_ERROR_PARTIAL_CHAR || code == XML_ERROR_UNCLOSED_CDATA_SECTION
    {
        return offset
    }
    return parse(stream + [0x20], final: false)?.1
}

/// The names of an element and its attributes, then of its descendants', in document order.
func starts(of element: XElement, into result: inout [[XMLName]]) {
    result.append([element.name] + element.attributes.map(\.name))
    for child in element.children { starts(of: child, into: &result) }
}

/// The stream parser's names against Expat's namespace processing, on a stream that was not
/// restarted: equal names (prefixes too) for every element it reported; a failure of the
/// stream's syntax exactly where Expat fails (limits and encodings are the parser's own).
func compareWithExpatNamespaces(_ stream: [UInt8], _ outcome: Outcome) {
    let condition = outcome.error?.condition
    // (The parser holds a stream's first byte back until the second arrives.)
    guard condition != .unsupportedEncoding, condition != .policyViolation, stream.count >= 2 else { return }
    let reference = ExpatNamespaces(stream)
    var ours: [[XMLName]] = []
    for event in outcome.events {
        switch event {
        case .streamOpen(let header): ours.append([header.name] + header.attributes.map(\.name))
        case .element(let element): starts(of: element, into: &ours)
        case .streamClose: break
        }
    }
    let prefixes = { (names: [[XMLName]]) in names.map { $0.map { $0.prefix ?? "" } } }
    require(
        ours.count <= reference.starts.count && Array(reference.starts[..<ours.count]) == ours
            && prefixes(Array(reference.starts[..<ours.count])) == prefixes(ours),
        "the stream parser's names differ from Expat's: \(ours) against \(reference.starts)"
    )
    // Expat's namespace tokenizer refuses a name with a second colon (or an entity name with a
    // colon) as it reads it, the stream parser once the token is complete: a failure inside the
    // token the input ends in is Expat's only.
    if reference.failed, outcome.error == nil, let start = unfinishedTokenStart(stream), reference.failure >= start {
        return
    }
    require(
        (outcome.error != nil) == reference.failed,
        "the stream parser \(outcome.error.map { "failed (\($0))" } ?? "did not fail") where Expat's namespace "
            + "processing \(reference.failed ? "failed" : "did not")"
    )
}

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let seed = input.byte()
    let stream = input.rest()
    var restarted = false
    let whole = run([stream[...]], restarted: &restarted)
    if !restarted { compareWithExpatNamespaces(stream, whole) }
    var splitRestarted = false
    let split = run(chunks(of: stream, seed: seed), restarted: &splitRestarted)
    // When the stream breaks a size limit and is malformed too, which of the two is found first
    // depends on where the bytes were cut: then both must fail, after the same events.
    let limitFirst =
        whole.events == split.events && whole.error != nil && split.error != nil
        && (whole.error?.condition == .policyViolation || split.error?.condition == .policyViolation)
    require(
        whole == split || limitFirst,
        "a split of the stream parsed differently (seed \(seed)): whole \(whole.events.count) events, "
            + "\(String(describing: whole.error)); split \(split.events.count) events, \(String(describing: split.error))"
    )
    _ = JID(String(decoding: stream, as: UTF8.self))
    return 0
}
