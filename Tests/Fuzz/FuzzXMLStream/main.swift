// libFuzzer target: the XML stream parser (small limits, so that they are hit; a stream
// restart after `<success/>` as after SASL) and the XMPP views over what it yields. The first
// byte picks the split. Invariants: any split of the stream gives the same events and the same
// error condition as the whole stream (where a limit is broken as well as the syntax, either);
// every element serializes to text that parses back to an equal element; the same element built
// again in code from its names and strings is equal and serializes to the same text (so the
// optimized build's string and serializer paths are checked too, which the debug-built unit
// tests cannot be); its views never crash.
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

func run(_ pieces: [ArraySlice<UInt8>]) -> Outcome {
    var parser = XMLStreamParser(
        configuration: .init(maximumElementSize: 2048, maximumDepth: 8, maximumAttributes: 8, maximumElements: 64)
    )
    var outcome = Outcome()
    var restarted = false
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

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let seed = input.byte()
    let stream = input.rest()
    let whole = run([stream[...]])
    let split = run(chunks(of: stream, seed: seed))
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
