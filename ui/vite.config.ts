import { defineConfig } from "vite";

// Tauri serves ui/dist; relative asset URLs so the built page also loads from a file
// server in the mocked-IPC end-to-end test.
export default defineConfig({
  base: "./",
  clearScreen: false,
  server: { port: 5173, strictPort: true },
  build: { target: "es2022", outDir: "dist", emptyOutDir: true },
  test: { environment: "node", include: ["src/**/*.test.ts"] },
} as any);
