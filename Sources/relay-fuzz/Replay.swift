#if !FUZZING
import Foundation

/// Without libFuzzer (a normal build), the same target replays files or folders of inputs: the seed corpora in
/// `make test`, and any crash file a fuzzing run left behind. `--cbor` first replays them into the App Attest
/// target instead of the request parser.
@main
struct Replay {
    static func main() {
        var count = 0
        var paths = CommandLine.arguments.dropFirst()
        if paths.first == "--cbor" {
            FuzzTarget.selected = .attestation
            paths = paths.dropFirst()
        }
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("no such input: \(path)\n".utf8))
                exit(2)
            }
            let files = isDirectory.boolValue
                ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { "\(path)/\($0)" }
                : [path]
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                data.withUnsafeBytes { FuzzTarget.run($0) }
                count += 1
            }
        }
        print("replayed \(count) inputs without a finding")
    }
}
#endif
