// libFuzzer target: the XML stream parser (small limits, so that they are hit; a stream
// restart after `<success/>` as after SASL) and the XMPP views over what it yields. The first
// byte picks the split. Invariants: any split of the stream gives the same events and the same
// error condition as the whole stream (where a limit is broken as well as the syntax, either); every element serializes and its views never crash.
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
                _ = XMLSerializer.string(element)
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
