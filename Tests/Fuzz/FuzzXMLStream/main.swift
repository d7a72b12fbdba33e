// libFuzzer target: the XML stream parser and the XMPP views over what it yields, fed in the
// chunk size the first byte picks, with small limits so that they are hit.
import TetherCore
import TetherXML
import TetherXMPP

@c(LLVMFuzzerTestOneInput)
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let chunk = Int(bytes[0]) + 1
    let input = Array(bytes.dropFirst())
    var parser = XMLStreamParser(
        configuration: .init(maximumElementSize: 2048, maximumDepth: 8, maximumAttributes: 8, maximumElements: 64)
    )
    var offset = 0
    var restarted = false
    while offset < input.count {
        let end = min(offset + chunk, input.count)
        parser.append(input.backDeployedSpan.extracting(offset..<end))
        offset = end
        while true {
            guard let event = try? parser.next() else { return 0 }
            if case .element(let element) = event {
                _ = XMLSerializer.string(element)
                _ = StreamFeatures(element)?.mechanisms
                _ = StreamError(element)?.condition
                _ = Stanza(element)?.from
                _ = SASLElement(element)
                if element.localName == "success", !restarted {
                    restarted = true
                    let rest = parser.restart()
                    parser.append(rest.backDeployedSpan)
                }
            }
        }
    }
    _ = JID(String(decoding: input, as: UTF8.self))
    return 0
}
