// swift-tools-version:6.0
// The reduced program behind the driver's Handoff (run by ../continuation-fast-path.sh).
import PackageDescription

let package = Package(
    name: "ContinuationFastPath",
    targets: [.executableTarget(name: "ContinuationFastPath")]
)
