/* Copyright © 2023-2024 Apple Inc. */

#ifndef MLX_HALF_H
#define MLX_HALF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__ARM_FEATURE_FP16_SCALAR_ARITHMETIC) || defined(__aarch64__)
#define HAS_FLOAT16
#include <arm_fp16.h>
typedef __fp16 float16_t;
#endif

#if defined(__ARM_FEATURE_BF16) || defined(__aarch64__)
#define HAS_BFLOAT16
#include <arm_bf16.h>
typedef __bf16 bfloat16_t;
#endif

/* Linux x86_64 (no __fp16/__bf16 in GCC 12's C++): the types are carried as their
 * 16 raw bits; mlx-c only passes them by pointer, so the layout is all that matters. */
#if !defined(HAS_FLOAT16) && defined(__x86_64__)
#define HAS_FLOAT16
typedef uint16_t float16_t;
#endif
#if !defined(HAS_BFLOAT16) && defined(__x86_64__)
#define HAS_BFLOAT16
typedef uint16_t bfloat16_t;
#endif

#ifdef __cplusplus
}
#endif

#endif
