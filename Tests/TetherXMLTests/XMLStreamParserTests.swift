import Testing
import TetherCore
import TetherTestSupport

@testable import TetherXML

let streamsNamespace = "http://etherx.jabber.org/streams"

/// Feeds `bytes` in the given chunk sizes (nil: whole) and collects the events or the first error.
func parse(
    _ bytes: [UInt8],
    chunks: [Int]? = nil,
    configuration: XMLStreamParser.Configuration = .init()
) -> (events: [XMLStreamEvent], error: XMLStreamError?) {
    var parser = XMLStreamParser(configuration: configuration)
    var events: [XMLStreamEvent] = []
    var offset = 0
    var sizes = (chunks ?? [max(bytes.count, 1)]).makeIterator()
    while offset < bytes.count {
        let size = sizes.next() ?? 1
        let end = min(offset + size, bytes.count)
        parser.append(bytes.backDeployedSpan.extracting(offset..<end))
        offset = end
        do {
            while let event = try parser.next() { events.append(event) }
        } catch {
            return (events, error)
        }
    }
    return (events, nil)
}

func randomChunks(_ count: Int, seed: UInt64) -> [Int] {
    var rng = SeededRandomNumberGenerator(seed: seed)
    return (0..<count).map { _ in Int.random(in: 1...23, using: &rng) }
}

/// Every way of feeding the same bytes gives the same events.
func parseAllWays(
    _ text: String,
    configuration: XMLStreamParser.Configuration = .init()
) -> (events: [XMLStreamEvent], error: XMLStreamError?) {
    let bytes = Array(text.utf8)
    let whole = parse(bytes, configuration: configuration)
    let oneByte = parse(bytes, chunks: Array(repeating: 1, count: bytes.count), configuration: configuration)
    #expect(oneByte.events == whole.events)
    #expect(oneByte.error?.condition == whole.error?.condition)
    for seed in 1...3 as ClosedRange<UInt64> {
        let random = parse(bytes, chunks: randomChunks(bytes.count, seed: seed), configuration: configuration)
        #expect(random.events == whole.events)
        #expect(random.error?.condition == whole.error?.condition)
    }
    return whole
}

struct ProsodyWireTests {
    static let header =
        "<?xml version='1.0'?><stream:stream from='localhost' xml:lang='en' xmlns:stream='http://etherx.jabber.org/streams' id='5d80917d-1a2b' version='1.0' xmlns='jabber:client'>"
    static let reorderedHeader =
        "<?xml version='1.0'?><stream:stream version='1.0' xmlns='jabber:client' id='5d80917d-1a2b' xml:lang='en' from='localhost' xmlns:stream='http://etherx.jabber.org/streams'>"
    static let features = [
        "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-1</mechanism><mechanism>PLAIN</mechanism></mechanisms></stream:features>",
        "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-1</mechanism><mechanism>PLAIN</mechanism><mechanism>SCRAM-SHA-256</mechanism></mechanisms></stream:features>",
        "<stream:features><ver xmlns='urn:xmpp:features:rosterver'/><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/><c ver='wBr6DNC6Vxj+iDPS/AmhkECMTr8=' node='http://prosody.im' hash='sha-1' xmlns='http://jabber.org/protocol/caps'/><sm xmlns='urn:xmpp:sm:2'><optional/></sm><sm xmlns='urn:xmpp:sm:3'><optional/></sm><sub xmlns='urn:xmpp:features:pre-approval'/><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><required/></bind><session xmlns='urn:ietf:params:xml:ns:xmpp-session'><optional/></session></stream:features>",
        "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-1</mechanism><mechanism>PLAIN</mechanism></mechanisms></stream:features>",
        "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-1</mechanism><mechanism>PLAIN</mechanism><mechanism>SCRAM-SHA-1-PLUS</mechanism></mechanisms></stream:features>",
    ]

    @Test(arguments: [header, reorderedHeader])
    func headersInAnyAttributeOrder(_ header: String) throws {
        let result = parseAllWays(header)
        #expect(result.error == nil)
        guard case .streamOpen(let open) = try #require(result.events.first) else {
            Issue.record("no stream header")
            return
        }
        #expect(open.name == XMLName("stream", namespace: streamsNamespace))
        #expect(open.name.prefix == "stream")
        #expect(open.attribute("from") == "localhost")
        #expect(open.attribute("id") == "5d80917d-1a2b")
        #expect(open.attribute("version") == "1.0")
        #expect(open.attribute("lang", namespace: XMLName.xmlNamespace) == "en")
        #expect(open.defaultNamespace == "jabber:client")
        #expect(Set(open.namespaceDeclarations.map(\.uri)) == ["jabber:client", streamsNamespace])
    }

    @Test(arguments: features)
    func featuresParseAndRoundTrip(_ features: String) throws {
        let result = parseAllWays(Self.header + features + "</stream:stream>")
        #expect(result.error == nil)
        #expect(result.events.count == 3)
        guard case .element(let element) = result.events[1] else {
            Issue.record("no features element")
            return
        }
        #expect(element.name == XMLName("features", namespace: streamsNamespace))
        if let mechanisms = element.firstChild("mechanisms", namespace: "urn:ietf:params:xml:ns:xmpp-sasl") {
            #expect(mechanisms.children.map(\.text).contains("PLAIN"))
        } else {
            #expect(
                element.firstChild("bind", namespace: "urn:ietf:params:xml:ns:xmpp-bind")?.firstChild("required") != nil
            )
        }
        #expect(result.events.last == .streamClose)
        // The standalone serialisation parses back to the same element.
        let again = parseAllWays("<root>" + XMLSerializer.string(element) + "</root>")
        #expect(again.events.dropFirst().first == .element(element))
    }

    @Test func featureChildOrderDoesNotMatter() throws {
        let a =
            "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/></stream:features>"
        let b =
            "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/></stream:features>"
        for text in [a, b] {
            guard case .element(let element) = parseAllWays(Self.header + text).events.last else {
                Issue.record("no element")
                continue
            }
            #expect(element.firstChild("starttls", namespace: "urn:ietf:params:xml:ns:xmpp-tls") != nil)
            #expect(element.firstChild("mechanisms", namespace: "urn:ietf:params:xml:ns:xmpp-sasl") != nil)
        }
    }
}

struct RestrictedXMLTests {
    static let open = "<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>"

    static let table: [(String, XMLStreamError.Condition)] = [
        (open + "<!-- hi -->", .restrictedXML),
        (open + "<?foo bar?>", .restrictedXML),
        ("<!DOCTYPE stream:stream [<!ENTITY x 'y'>]>" + open, .restrictedXML),
        (open + "<message>&foo;</message>", .restrictedXML),
        (open + "<message><body></message>", .notWellFormed),
        (open + "<foo:bar/>", .notWellFormed),
        (open + "<message><body>\u{FF}\u{FE}</body></message>", .notWellFormed),
        ("\u{FEFF}" + open, .unsupportedEncoding),
        ("<?xml version='1.0' encoding='ISO-8859-1'?>" + open, .unsupportedEncoding),
        (open + "<?xml version='1.0'?>", .notWellFormed),
    ]

    @Test func rejectsWhatRFC6120Restricts() {
        for (text, condition) in Self.table {
            var bytes = Array(text.utf8)
            if text.contains("\u{FF}\u{FE}") {
                // Raw invalid bytes, not their UTF-8 encoding.
                bytes = Array((Self.open + "<message><body>").utf8) + [0xFF, 0xFE] + Array("</body></message>".utf8)
            }
            for chunks in [nil, Array(repeating: 1, count: bytes.count)] {
                let result = parse(bytes, chunks: chunks)
                #expect(result.error?.condition == condition, "\(text)")
            }
        }
    }

    @Test func acceptsWhatIsAllowed() throws {
        let result = parseAllWays(
            Self.open
                + "  \n<message><body>x &lt; &#65; <![CDATA[<b>]]> &apos;&quot;&gt;&amp;</body></message> keep-alive text "
        )
        #expect(result.error == nil)
        guard case .element(let message) = result.events.last else {
            Issue.record("no message")
            return
        }
        #expect(message.firstChild("body")?.text == "x < A <b> '\">&")
        #expect(message.namespace == "jabber:client")
    }

    @Test func errorsAreSticky() {
        var parser = XMLStreamParser()
        parser.append(Array((Self.open + "<!-- x -->").utf8).backDeployedSpan)
        expectThrows(\XMLStreamError.condition, .restrictedXML) { while try parser.next() != nil {} }
        parser.append(Array("<message/>".utf8).backDeployedSpan)
        expectThrows(\XMLStreamError.condition, .restrictedXML) { try parser.next() }
    }
}

struct IncrementalDeliveryTests {
    @Test func everyEventArrivesWithItsLastByte() throws {
        let header = ProsodyWireTests.header
        let stanza = "<Foo a='1'/>"
        let bytes = Array((header + stanza + "<iq type='get' id='1'><ping xmlns='urn:xmpp:ping'/></iq>").utf8)
        var parser = XMLStreamParser()
        #expect(parser.reparseDeferral != .couldNotDisable)
        var boundaries: [Int] = []
        for (index, byte) in bytes.enumerated() {
            parser.append([byte].backDeployedSpan)
            while try parser.next() != nil { boundaries.append(index + 1) }
        }
        let headerEnd = header.utf8.count
        let fooEnd = headerEnd + stanza.utf8.count
        #expect(boundaries == [headerEnd, fooEnd, bytes.count])
    }

    @Test func restartAfterSuccessHandsTheRestToTheNewStream() throws {
        let first = ProsodyWireTests.header
        let success = "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>"
        let second =
            "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='second' version='1.0'>"
        let chunk = Array((success + second + "<stream:features/>").utf8)
        for split in [chunk.count, 1, 7] {
            var parser = XMLStreamParser()
            parser.append(Array(first.utf8).backDeployedSpan)
            #expect(try parser.next().map { if case .streamOpen = $0 { true } else { false } } == true)
            var offset = 0
            var successSeen = false
            var remainder: [UInt8] = []
            while offset < chunk.count {
                let end = min(offset + split, chunk.count)
                parser.append(chunk.backDeployedSpan.extracting(offset..<end))
                offset = end
                if let event = try parser.next(), case .element(let element) = event, element.localName == "success" {
                    successSeen = true
                    remainder = parser.restart() + Array(chunk[offset...])
                    break
                }
            }
            #expect(successSeen)
            #expect(remainder == Array((second + "<stream:features/>").utf8), "split \(split)")
            parser.append(remainder.backDeployedSpan)
            guard case .streamOpen(let header) = try parser.next() else {
                Issue.record("no second header")
                continue
            }
            #expect(header.attribute("id") == "second")
            guard case .element(let features) = try parser.next() else {
                Issue.record("no features")
                continue
            }
            #expect(features.localName == "features")
        }
    }

    /// A read of many stanzas is parsed ahead in one pass (Expat suspended only when
    /// `maximumEventsAhead` wait): every event comes out in order, and a restart after one of them
    /// hands back exactly the bytes after it, even when what followed failed in the old stream.
    @Test func stanzasParsedAheadAreHandedOutInOrderAndARestartCutsAfterTheLastOne() throws {
        let count = 3 * XMLStreamParser.Configuration().maximumEventsAhead + 7
        let stanzas = (0..<count).map { "<m id='\($0)'/>" }.joined()
        let success = "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>"
        let after =
            "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='\(streamsNamespace)' id='2'>"
        var parser = XMLStreamParser()
        parser.append(Array((ProsodyWireTests.header + stanzas + success + after + stanzas).utf8))
        guard case .streamOpen = try parser.next() else {
            Issue.record("no header")
            return
        }
        for index in 0..<count {
            guard case .element(let element) = try parser.next() else {
                Issue.record("element \(index) missing")
                return
            }
            #expect(element.attribute("id") == "\(index)")
        }
        guard case .element(let successElement) = try parser.next() else {
            Issue.record("no success")
            return
        }
        #expect(successElement.localName == "success")
        // Parsed ahead in the old stream, the XML declaration was an error; the restart takes it
        // back with everything after `<success/>`.
        let rest = parser.restart()
        #expect(rest == Array((after + stanzas).utf8))
        parser.append(rest)
        guard case .streamOpen(let header) = try parser.next() else {
            Issue.record("no second header")
            return
        }
        #expect(header.attribute("id") == "2")
        var elements = 0
        while case .element = try parser.next() { elements += 1 }
        #expect(elements == count)
    }

    /// Elements that followed the restart's element in the same read, parsed ahead and waiting,
    /// are not handed out: the restart gives their bytes back.
    @Test func aRestartGivesBackElementsParsedAhead() throws {
        let success = "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>"
        let after = "<m id='a'/><m id='b'/>"
        var parser = XMLStreamParser()
        parser.append(Array((ProsodyWireTests.header + success + after).utf8))
        _ = try parser.next()
        guard case .element(let element) = try parser.next() else {
            Issue.record("no success")
            return
        }
        #expect(element.localName == "success")
        #expect(parser.restart() == Array(after.utf8))
        #expect(try parser.next() == nil)
    }

    @Test func restartAfterProceedReturnsTheTLSBytes() throws {
        var parser = XMLStreamParser()
        let tlsRecord: [UInt8] = [0x16, 0x03, 0x03, 0x00, 0x05, 0x01, 0x02]
        parser.append(
            Array((ProsodyWireTests.header + "<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>").utf8)
                .backDeployedSpan
        )
        parser.append(tlsRecord.backDeployedSpan)
        _ = try parser.next()
        guard case .element(let proceed) = try parser.next() else {
            Issue.record("no proceed")
            return
        }
        #expect(proceed.localName == "proceed")
        #expect(parser.restart() == tlsRecord)
        // The reset parser starts a fresh document.
        parser.append(Array(ProsodyWireTests.header.utf8).backDeployedSpan)
        #expect(try parser.next() != nil)
    }

    @Test func characterDataPiecesAreJoined() throws {
        let result = parseAllWays(RestrictedXMLTests.open + "<m><body>x &lt; &#65;</body><body>a<b/>c</body></m>")
        guard case .element(let message) = result.events.last else {
            Issue.record("no message")
            return
        }
        #expect(message.children.map(\.text) == ["x < A", "ac"])
        #expect(
            message.children[1].childNodes == [
                .text("a"), .element(XElement(XMLName("b", namespace: "jabber:client"))), .text("c"),
            ]
        )
    }
}

struct LimitTests {
    static let open = RestrictedXMLTests.open

    @Test func elementSizeIsCountedInRawBytesWhileItArrives() {
        let limit = 256 * 1024
        let overhead = "<message><body></body></message>".utf8.count
        let fits = Self.open + "<message><body>" + String(repeating: "a", count: limit - overhead) + "</body></message>"
        #expect(parse(Array(fits.utf8)).error == nil)
        let tooBig =
            Self.open + "<message><body>" + String(repeating: "a", count: limit - overhead + 1) + "</body></message>"
        #expect(
            parse(Array(tooBig.utf8), chunks: Array(repeating: 4096, count: 100)).error?.condition == .policyViolation
        )
        // A start tag that never ends is stopped too, so memory stays bounded.
        let endless = Array((Self.open + "<message to='").utf8) + Array(repeating: UInt8(ascii: "a"), count: limit + 1)
        #expect(parse(endless, chunks: Array(repeating: 8192, count: 100)).error?.condition == .policyViolation)
    }

    @Test func depthAttributesAndElementCountAreLimited() {
        let configuration = XMLStreamParser.Configuration(maximumDepth: 3, maximumAttributes: 2, maximumElements: 4)
        #expect(parse(Array((Self.open + "<a><b><c/></b></a>").utf8), configuration: configuration).error == nil)
        #expect(
            parse(Array((Self.open + "<a><b><c><d/></c></b></a>").utf8), configuration: configuration).error?.condition
                == .policyViolation
        )
        #expect(parse(Array((Self.open + "<a x='1' y='2'/>").utf8), configuration: configuration).error == nil)
        #expect(
            parse(Array((Self.open + "<a x='1' y='2' z='3'/>").utf8), configuration: configuration).error?.condition
                == .policyViolation
        )
        // Namespace declarations count as attributes, on stanzas and on the stream header.
        #expect(
            parse(Array((Self.open + "<a xmlns:p='urn:p' x='1'/>").utf8), configuration: configuration).error == nil
        )
        #expect(
            parse(Array((Self.open + "<a xmlns:p='urn:p' x='1' y='2'/>").utf8), configuration: configuration).error?
                .condition == .policyViolation
        )
        #expect(
            parse(
                Array((Self.open + "<a xmlns:p='urn:p' xmlns:q='urn:q' xmlns:r='urn:r'/>").utf8),
                configuration: configuration
            )
            .error?.condition == .policyViolation
        )
        let header = "<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'"
        #expect(parse(Array((header + ">").utf8), configuration: configuration).error == nil)
        #expect(
            parse(Array((header + " id='1'>").utf8), configuration: configuration).error?.condition == .policyViolation
        )
        #expect(parse(Array((Self.open + "<a><b/><b/><b/></a>").utf8), configuration: configuration).error == nil)
        #expect(
            parse(Array((Self.open + "<a><b/><b/><b/><b/></a>").utf8), configuration: configuration).error?.condition
                == .policyViolation
        )
        // Deep nesting far beyond any stack cannot crash the parser.
        let deep = Self.open + String(repeating: "<a>", count: 100_000)
        #expect(parse(Array(deep.utf8)).error?.condition == .policyViolation)
    }
}

/// The parser's name cache must never change what a name is, however full it gets.
struct NameCacheTests {
    static let open = RestrictedXMLTests.open

    /// Stanzas with ever new element, attribute and prefix names (more than the cache holds, so
    /// it starts again, also in the middle of a stanza) keep exactly their names.
    @Test(arguments: [16, 512])
    func newNamesBeyondTheCacheKeepTheirNames(capacity: Int) throws {
        var text = Self.open
        var expected: [(element: String, attribute: String, namespace: String)] = []
        for index in 0..<300 {
            let namespace = "urn:test:\(index % 7)"
            text += "<m\(index) xmlns:p\(index)='\(namespace)' a\(index)='\(index)' p\(index):b='x'>"
            text += "<c\(index % 5)/><p\(index):d/></m\(index)>"
            expected.append(("m\(index)", "a\(index)", namespace))
        }
        let result = parse(Array(text.utf8), configuration: .init(nameCacheCapacity: capacity))
        #expect(result.error == nil)
        let elements = result.events.compactMap { event -> XElement? in
            if case .element(let element) = event { return element }
            return nil
        }
        #expect(elements.count == expected.count)
        for (element, expected) in zip(elements, expected) {
            #expect(element.name == XMLName(expected.element, namespace: "jabber:client"))
            #expect(element.attribute(expected.attribute) != nil)
            #expect(element.attribute("b", namespace: expected.namespace) == "x")
            let prefix = "p" + expected.element.dropFirst()
            #expect(element.namespaceDeclarations == [XMLNamespaceDeclaration(prefix: prefix, uri: expected.namespace)])
            #expect(
                element.children.map(\.name) == [
                    XMLName("c\(Int(expected.element.dropFirst())! % 5)", namespace: "jabber:client"),
                    XMLName("d", namespace: expected.namespace, prefix: prefix),
                ]
            )
            // Each serialisation parses on its own to the same element.
            let reparsed = parse(Array((Self.open + element.description).utf8)).events.last
            #expect(reparsed == .element(element))
        }
    }

    /// Names longer than the longest cached key, and names equal in their first and last eight
    /// bytes, stay apart.
    @Test func longAndSimilarNamesStayApart() throws {
        let long = String(repeating: "n", count: 600)
        let similar = ["abcdefgh-1-ijklmnop", "abcdefgh-2-ijklmnop", "abcdefghijklmnop", "abcdefghXijklmnop"]
        var text = Self.open + "<\(long) \(long)='1'/>"
        for name in similar { text += "<\(name) \(name)='\(name)'/>" }
        let result = parseAllWays(text, configuration: .init(nameCacheCapacity: 16))
        #expect(result.error == nil)
        let elements = result.events.compactMap { event -> XElement? in
            if case .element(let element) = event { return element }
            return nil
        }
        #expect(elements.map(\.localName) == [long] + similar)
        #expect(elements.first?.attribute(long) == "1")
        for (element, name) in zip(elements.dropFirst(), similar) {
            #expect(element.attribute(name) == name)
            #expect(element.attributes.count == 1)
        }
    }
}

extension NameCacheTests {
    /// Key comparison without the hash (which tells such keys apart first): edges determine keys
    /// of up to 16 bytes, the middle words the rest.
    @Test func keyComparisonLooksAtEveryByte() {
        func edges(_ key: String) -> [UInt64] {
            let bytes = Array(key.utf8)
            let (first, last) = unsafe bytes.withUnsafeBytes { unsafe XMLNameCache.edges($0.baseAddress!, bytes.count) }
            return [first, last]
        }
        func middleEqual(_ lhs: String, _ rhs: String) -> Bool {
            let left = Array(lhs.utf8)
            let right = Array(rhs.utf8)
            return unsafe left.withUnsafeBytes { left in
                unsafe right.withUnsafeBytes { right in
                    unsafe XMLNameCache.middleEquals(left.baseAddress!, right.baseAddress!, left.count)
                }
            }
        }
        let short = [
            "a", "ab", "ba", "abc", "acb", "abcd", "abce", "abcdefg", "abcdefh", "abcdefgh", "abcdefghijklmnop",
        ]
        for (index, key) in short.enumerated() {
            for other in short[(index + 1)...] where other.utf8.count == key.utf8.count {
                #expect(edges(key) != edges(other), "\(key) vs \(other)")
            }
        }
        #expect(middleEqual("abcdefgh-1-ijklmnop", "abcdefgh-1-ijklmnop"))
        #expect(!middleEqual("abcdefgh-1-ijklmnop", "abcdefgh-2-ijklmnop"))
        let long = String(repeating: "x", count: 40)
        #expect(!middleEqual(long + "a" + long, long + "b" + long))
        #expect(middleEqual(long + "a" + long, long + "a" + long))
    }
}

extension LimitTests {
    /// A start tag whose attribute values alone exceed the size limit is stopped even when it
    /// arrives in one piece (so the parser never holds more than about the limit).
    @Test func attributeValuesCountTowardsTheSizeLimit() {
        let configuration = XMLStreamParser.Configuration(maximumElementSize: 4096)
        let value = String(repeating: "v", count: 3000)
        let tag = Self.open + "<message a='\(value)' b='\(value)'><body/>"
        let result = parse(Array(tag.utf8), configuration: configuration)
        #expect(result.error?.condition == .policyViolation)
        let fits = Self.open + "<message a='\(value)'/>"
        #expect(parse(Array(fits.utf8), configuration: configuration).error == nil)
    }
}

extension LimitTests {
    /// One read that holds many small elements is not one large element: found by the
    /// FuzzXMLStream target (a stream fed whole failed with "element larger than 2048 bytes"
    /// while every split of it parsed).
    @Test func manySmallElementsInOneReadFitTheSizeLimit() {
        let configuration = XMLStreamParser.Configuration(maximumElementSize: 256)
        let stanzas = (0..<40).map { "<message id='m\($0)'><body>hello \($0)</body></message>" }
        let result = parseAllWays(Self.open + stanzas.joined(), configuration: configuration)
        #expect(result.error == nil)
        #expect(result.events.count == 41)
        // An element over the limit still fails, read whole or in pieces.
        let large = Self.open + "<message><body>" + String(repeating: "x", count: 300) + "</body></message>"
        #expect(parseAllWays(large, configuration: configuration).error?.condition == .policyViolation)
    }
}

/// Inputs FuzzXMLStream found.
struct FuzzFoundXMLTests {
    /// A zero byte second made Expat read the stream as UTF-16 when it arrived in one read, and
    /// fail on the zero when it arrived byte by byte: refused the same way now.
    @Test func aZeroAmongTheFirstTwoBytesIsRefusedHoweverItArrives() {
        for text in [" \u{0} v", "<\u{0}", "\u{0}<"] {
            let result = parseAllWays(text)
            #expect(result.error?.condition == .unsupportedEncoding, "\(Array(text.utf8))")
            #expect(result.events.isEmpty)
        }
    }
}

/// The stream's end: an empty root reports both its opening and its end, and nothing after the
/// closing tag is parsed (the peer ends the connection next), however the bytes were cut.
struct StreamEndTests {
    static let open = RestrictedXMLTests.open

    @Test func anEmptyRootOpensAndCloses() throws {
        let result = parseAllWays(
            "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='\(streamsNamespace)'/>"
        )
        #expect(result.error == nil)
        try #require(result.events.count == 2)
        guard case .streamOpen(let header) = result.events[0] else {
            Issue.record("the first event is not the stream's opening: \(result.events[0])")
            return
        }
        #expect(header.name == XMLName("stream", namespace: streamsNamespace, prefix: "stream"))
        #expect(result.events[1] == .streamClose)
    }

    @Test(arguments: [Array("q".utf8), Array("q.".utf8) + [0xC7], Array("<message/>".utf8), [0xFF, 0x00], []])
    func bytesAfterTheClosingTagAreNotParsed(tail: [UInt8]) {
        let bytes = Array((Self.open + "<message><body>hi</body></message></stream:stream>").utf8) + tail
        let whole = parse(bytes)
        #expect(whole.error == nil)
        #expect(whole.events.count == 3)
        #expect(whole.events.last == .streamClose)
        for cut in 1..<bytes.count {
            let split = parse(bytes, chunks: [cut, bytes.count])
            #expect(split.events == whole.events, "cut at \(cut)")
            #expect(split.error == nil, "cut at \(cut)")
        }
        var parser = XMLStreamParser()
        parser.append(bytes)
        while (try? parser.next()) ?? nil != nil {}
        parser.append(Array(repeating: UInt8(ascii: "x"), count: 100_000))
        let pending = parser.hasPendingBytes
        #expect(!pending)
        let next = try? parser.next()
        #expect(next == nil)
    }
}
