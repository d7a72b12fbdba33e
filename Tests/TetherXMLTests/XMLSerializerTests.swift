import Testing
import TetherCore

@testable import TetherXML

struct XMLSerializerTests {
    @Test func declaresNamespacesOnlyWhereNeeded() {
        let message = XElement(
            XMLName("message", namespace: "jabber:client"),
            attributes: [
                XMLAttribute(XMLName("to"), "bob@example.com"),
                XMLAttribute(XMLName("lang", namespace: XMLName.xmlNamespace), "en"),
            ],
            children: [
                .element(
                    XElement(XMLName("body", namespace: "jabber:client"), children: [.text("a < b & 'c' > d\r")])
                ),
                .element(XElement(XMLName("request", namespace: "urn:xmpp:receipts"))),
                .element(
                    XElement(
                        XMLName("x", namespace: "urn:x", prefix: "x"),
                        attributes: [XMLAttribute(XMLName("a", namespace: "urn:y"), "v\t1\n")]
                    )
                ),
            ]
        )
        #expect(
            XMLSerializer.string(message)
                == "<message xmlns='jabber:client' to='bob@example.com' xml:lang='en'><body>a &lt; b &amp; 'c' &gt; d&#13;</body><request xmlns='urn:xmpp:receipts'/><x:x xmlns:x='urn:x' xmlns:ns1='urn:y' ns1:a='v&#9;1&#10;'/></message>"
        )
        // Inside a client stream the default namespace is already bound.
        #expect(XMLSerializer.string(message, in: .clientStream).hasPrefix("<message to='bob@example.com'"))
        #expect(
            String(
                decoding: XMLSerializer.streamHeader(attributes: [("to", "example.com"), ("version", "1.0")]),
                as: UTF8.self
            )
                == "<?xml version='1.0'?><stream:stream to='example.com' version='1.0' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>"
        )
    }

    /// An attribute added while writing (an iq's id the connection gives it) comes out as if it
    /// were the tree's last attribute: escaped, after the namespace declarations and the others,
    /// on the root only, empty or not.
    @Test func addsAnAttributeWhileWriting() {
        let children: [XNode] = [.element(XElement(XMLName("q", namespace: "urn:x", prefix: "x")))]
        let attributes = [
            XMLAttribute(XMLName("type"), "get"),
            XMLAttribute(XMLName("a", namespace: "urn:y"), "v"),
        ]
        for children in [[], children] {
            let iq = XElement(XMLName("iq", namespace: "jabber:client"), attributes: attributes, children: children)
            let expected = XElement(
                XMLName("iq", namespace: "jabber:client"),
                attributes: attributes + [XMLAttribute(XMLName("id"), "a'b<&\"")],
                children: children
            )
            for scope in [XMLNamespaceScope(), .clientStream] {
                var written: [UInt8] = []
                XMLSerializer.write(iq, in: scope, adding: ("id", "a'b<&\""), into: &written)
                #expect(String(decoding: written, as: UTF8.self) == XMLSerializer.string(expected, in: scope))
            }
        }
    }

    /// parse(serialize(x)) == x for generated trees.
    @Test func randomTreesRoundTrip() throws {
        var rng = SeededRandomNumberGenerator(seed: 4242)
        for _ in 0..<300 {
            let tree = Self.randomElement(&rng, depth: 0)
            let text = XMLSerializer.string(tree)
            let bytes = Array(("<root>" + text + "</root>").utf8)
            for chunks in [nil, randomChunks(bytes.count, seed: rng.next())] {
                let result = parse(bytes, chunks: chunks)
                #expect(result.error == nil, "\(text)")
                #expect(result.events.dropFirst().first == .element(tree), "\(text)")
            }
        }
    }

    static let namespaces: [String?] = [nil, "jabber:client", "urn:a", "urn:b", "http://example.com/ns?x=1&y='2'"]
    static let prefixes: [String?] = [nil, nil, "a", "b", "stream"]

    static func randomText(_ rng: inout SeededRandomNumberGenerator) -> String {
        let pool = ["a", "Z", " ", "<", ">", "&", "'", "\"", "é", "😀", "\n", "\t", "]]>", "\r", "x"]
        return (0..<Int.random(in: 0...8, using: &rng)).map { _ in pool.randomElement(using: &rng)! }.joined()
    }

    static func randomElement(_ rng: inout SeededRandomNumberGenerator, depth: Int) -> XElement {
        let namespace = namespaces.randomElement(using: &rng)!
        let name = XMLName(
            "e\(Int.random(in: 0...3, using: &rng))",
            namespace: namespace,
            prefix: prefixes.randomElement(using: &rng)!
        )
        var attributes: [XMLAttribute] = []
        var used = Set<XMLName>()
        for index in 0..<Int.random(in: 0...3, using: &rng) {
            let attributeNamespace: String? =
                Bool.random(using: &rng) ? nil : ["urn:a", "urn:c", XMLName.xmlNamespace].randomElement(using: &rng)!
            let attributeName = XMLName(
                "at\(index)",
                namespace: attributeNamespace,
                prefix: Bool.random(using: &rng) ? "p" : nil
            )
            guard used.insert(attributeName).inserted else { continue }
            attributes.append(XMLAttribute(attributeName, randomText(&rng)))
        }
        var children: [XNode] = []
        if depth < 4 {
            for _ in 0..<Int.random(in: 0...4, using: &rng) {
                if Bool.random(using: &rng) {
                    children.append(.element(randomElement(&rng, depth: depth + 1)))
                } else {
                    let text = String(randomText(&rng).filter { $0 != "\r" })
                    if !text.isEmpty { children.append(.text(text)) }
                }
            }
        }
        return XElement(name, attributes: attributes, children: children)
    }
}

/// The single-allocation tree storage owns its name references: they live exactly as long as a
/// tree (or an unfinished builder) refers to them.
struct XMLTreeStorageTests {
    /// Escaping looks at eight bytes per step for the bytes that may need it: every such byte
    /// (and the ones that look like them to that test) at every position around the steps, in
    /// attribute values and in text, against a byte-by-byte reference; and what is written
    /// parses back to the same value.
    @Test func escapesEveryByteAtEveryPosition() throws {
        func reference(_ value: [UInt8], attribute: Bool) -> [UInt8] {
            value.flatMap { byte -> [UInt8] in
                switch byte {
                case UInt8(ascii: "&"): Array("&amp;".utf8)
                case UInt8(ascii: "<"): Array("&lt;".utf8)
                case UInt8(ascii: ">"): Array("&gt;".utf8)
                case 0x0D: Array("&#13;".utf8)
                case UInt8(ascii: "'") where attribute: Array("&apos;".utf8)
                case 0x0A where attribute: Array("&#10;".utf8)
                case 0x09 where attribute: Array("&#9;".utf8)
                default: [byte]
                }
            }
        }
        let specials: [UInt8] = [0x26, 0x3C, 0x3E, 0x0D, 0x27, 0x0A, 0x09, 0x22, 0x3D, 0x3F, 0x25, 0x0B, 0xC3]
        for length in 0...20 {
            for position in 0..<max(length, 1) {
                for special in specials {
                    var value = Array(repeating: UInt8(ascii: "a"), count: length)
                    if length > 0 { value[position] = special }
                    if special == 0xC3 && length > 0 {
                        // A two-byte sequence (é): its lead byte must not be taken for anything.
                        if position + 1 < length { value[position + 1] = 0xA9 } else { value[position] = 0x62 }
                    }
                    if special == 0x0B && length > 0 { value[position] = 0x62 }  // not allowed in XML
                    let text = String(decoding: value, as: UTF8.self)
                    var attributeBytes: [UInt8] = []
                    XMLSerializer.appendAttributeValue(text, &attributeBytes)
                    #expect(attributeBytes == reference(value, attribute: true), "attribute \(value)")
                    var textBytes: [UInt8] = []
                    XMLSerializer.appendText(value.backDeployedSpan, &textBytes)
                    #expect(textBytes == reference(value, attribute: false), "text \(value)")
                    let element = XElement(
                        XMLName("e"),
                        attributes: [XMLAttribute(XMLName("v"), text)],
                        children: [.text(text)]
                    )
                    var parser = XMLStreamParser()
                    parser.append(Array("<s>".utf8) + Array(element.description.utf8))
                    _ = try parser.next()
                    guard case .element(let parsed) = try parser.next() else {
                        Issue.record("no element for \(value)")
                        continue
                    }
                    #expect(parsed.attribute("v") == text, "\(value)")
                    // Carriage returns in text come back as newlines (XML end-of-line handling)
                    // unless escaped, which they are.
                    #expect(parsed.text == text, "\(value)")
                }
            }
        }
    }

    /// Values with nothing to escape, short (held inline by `String`) and long, come out as they
    /// are: the ids and domains every request carries.
    @Test func plainValuesOfEveryLength() {
        var rng = SeededRandomNumberGenerator(seed: 6120)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_".utf8)
        for length in 0...64 {
            for _ in 0..<20 {
                let value = String(
                    decoding: (0..<length).map { _ in alphabet.randomElement(using: &rng)! },
                    as: UTF8.self
                )
                var bytes: [UInt8] = []
                XMLSerializer.appendAttributeValue(value, &bytes)
                #expect(bytes == Array(value.utf8), "\(value)")
            }
        }
    }

    @Test func namesLiveAsLongAsTheirTree() {
        weak var weakName: XMLNameBox?
        var element: XElement?
        do {
            let name = XMLNameBox(XMLName("a", namespace: "urn:a"))
            weakName = name
            var builder = XMLTreeBuilder()
            let root = builder.startElement(builder.addName(name))
            builder.attribute(builder.addName(name), value: Array("value".utf8).backDeployedSpan)
            builder.endHeader(of: root)
            builder.characters(Array("text".utf8).backDeployedSpan)
            builder.endElement()
            element = builder.finish()
        }
        #expect(weakName != nil)
        #expect(element?.name == XMLName("a", namespace: "urn:a"))
        #expect(element?.attribute("a", namespace: "urn:a") == "value")
        #expect(element?.text == "text")
        element = nil
        #expect(weakName == nil)
    }

    @Test func unfinishedTreesReleaseTheirNames() {
        weak var resetName: XMLNameBox?
        weak var droppedName: XMLNameBox?
        var builder = XMLTreeBuilder()
        do {
            let name = XMLNameBox(XMLName("reset"))
            resetName = name
            builder.startElement(builder.addName(name))
        }
        builder.reset()
        #expect(resetName == nil)
        do {
            var other = XMLTreeBuilder()
            let name = XMLNameBox(XMLName("dropped"))
            droppedName = name
            other.startElement(other.addName(name))
        }
        #expect(droppedName == nil)
    }

    @Test func largeTreesKeepEveryByte() {
        let children = (0..<2000).map { index in
            XNode.element(
                XElement(
                    XMLName("c\(index % 37)", namespace: "urn:\(index % 5)"),
                    attributes: [XMLAttribute(XMLName("n"), String(repeating: "é", count: index % 11))],
                    children: [.text("t\(index)")]
                )
            )
        }
        let element = XElement(XMLName("root"), children: children)
        #expect(element.children.count == 2000)
        for (index, child) in element.children.enumerated() where index % 97 == 0 {
            #expect(child.name == XMLName("c\(index % 37)", namespace: "urn:\(index % 5)"))
            #expect(child.attribute("n") == String(repeating: "é", count: index % 11))
            #expect(child.text == "t\(index)")
        }
        #expect(element.compacted() == element)
        #expect(element.children[1999].compacted() == element.children[1999])
    }
}

/// The builder's byte buffer copies short runs with overlapping word stores: every length, and
/// growth past the initial capacity, must keep exactly the bytes appended.
struct PlainBufferTests {
    @Test func appendsEveryLengthExactly() {
        var buffer = PlainBuffer<UInt8>(capacity: 1)
        var expected: [UInt8] = []
        for length in 0...40 {
            let run = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ length) }
            unsafe run.withUnsafeBytes {
                unsafe buffer.append(bytes: $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, count: length)
            }
            expected += run
            let count = buffer.count
            #expect(count == expected.count)
        }
        let contents = unsafe buffer.withUnsafeBufferPointer { unsafe Array($0) }
        #expect(contents == expected)
        buffer.removeAll()
        let emptied = buffer.isEmpty
        #expect(emptied)
    }
}
